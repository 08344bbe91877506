package embedded

import (
	"os"

	"golang.org/x/sys/unix"
)

// willNeed asks the kernel to read n bytes of f from off into the page
// cache, without waiting for them.
func willNeed(f *os.File, off, n int64) {
	_ = unix.Fadvise(int(f.Fd()), off, n, unix.FADV_WILLNEED)
}
