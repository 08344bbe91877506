//go:build !linux

package embedded

import "os"

// willNeed does nothing where the kernel takes no such advice from Go's
// standard library: the store's opening reads the pages itself.
func willNeed(*os.File, int64, int64) {}
