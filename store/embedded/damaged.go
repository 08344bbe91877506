package embedded

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	berrors "go.etcd.io/bbolt/errors"
)

// ErrDamaged is returned when the store file's pages do not read as a
// store: zeroed or overwritten by a disk fault, or cut short. The error
// names the file; nothing in it can be decided on, so the process stops
// rather than deciding on windows it cannot read.
var ErrDamaged = errors.New("embedded: store file damaged")

// damagedAdvice tells the operator what to do with a damaged file.
const damagedAdvice = "with replayguard stopped, move the file aside and restore the directory from a backup; " +
	"starting on an empty directory instead forgets the windows, so replays of what the file held are applied again"

// damaged reports a file whose pages bbolt refused (an error at open) or
// found inconsistent (bbolt panics on a page that is not what its parent
// says it is) as ErrDamaged, naming the file and what to do.
func damaged(path string, what any) error {
	return fmt.Errorf("%w: %s: %v: %s", ErrDamaged, path, what, damagedAdvice)
}

// recoverDamaged turns a panic of bbolt inside a transaction into
// ErrDamaged in *err. bbolt rolls the transaction back before the panic
// leaves it, so the store stays usable for the transactions that do not
// touch the damaged pages. A read past the end of a file cut short faults
// in the mapping: guard turns that fault into a panic too. A panic raised
// anywhere but in bbolt is a defect of this program, not of the file: it
// goes on as it came, stack and all. Use as
//
//	defer recoverDamaged(path, &err, guard())
func recoverDamaged(path string, err *error, panicOnFault bool) {
	debug.SetPanicOnFault(panicOnFault)
	r := recover()
	if r == nil {
		return
	}
	if !raisedInBolt() {
		panic(r)
	}
	if _, fault := r.(interface{ Addr() uintptr }); fault {
		size := int64(-1)
		if st, serr := os.Stat(path); serr == nil {
			size = st.Size()
		}
		r = fmt.Sprintf("a page lies past the file's end: the file is cut short (%d bytes)", size)
	}
	*err = damaged(path, r)
}

// raisedInBolt reports whether the panic being recovered was raised in
// bbolt's code: the first frame below the runtime's panic machinery, the
// function that panicked or faulted, is bbolt's.
func raisedInBolt() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	panicking := false
	for {
		f, more := frames.Next()
		switch {
		case strings.HasPrefix(f.Function, "runtime."):
			panicking = panicking || f.Function == "runtime.gopanic" || f.Function == "runtime.sigpanic"
		case panicking:
			return strings.HasPrefix(f.Function, "go.etcd.io/bbolt")
		}
		if !more {
			return false
		}
	}
}

// guard makes a fault in the file's mapping a panic, for recoverDamaged,
// and returns the setting to restore.
func guard() bool { return debug.SetPanicOnFault(true) }

// isDamagedAtOpen reports the errors bbolt's Open returns for a file whose
// meta pages do not read as a bbolt file of this version.
// bbolt says "file size too small" without a sentinel, of a file shorter
// than its two meta pages.
func isDamagedAtOpen(err error) bool {
	return errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrInvalidMapping) ||
		strings.HasPrefix(err.Error(), "file size too small")
}
