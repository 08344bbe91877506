package web

import "errors"

// ErrConfig is returned by Run and Validate for a configuration that cannot
// be served.
var ErrConfig = errors.New("web: invalid configuration")

// ErrNoLineage is what Deps.Explain returns, wrapped with the detail, when
// no audit record read changed the entity (or the field) asked about;
// GET /api/v1/explain answers 404 with the error's text.
var ErrNoLineage = errors.New("no lineage")
