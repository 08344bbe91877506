package web

import "errors"

// ErrConfig is returned by Run and Validate for a configuration that cannot
// be served.
var ErrConfig = errors.New("web: invalid configuration")
