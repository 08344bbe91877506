package embedded

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// openTest opens a store in a new directory, closed when the test ends.
func openTest(t *testing.T) *Store {
	t.Helper()
	return openTestIn(t, t.TempDir())
}

// openTestIn opens the store in dir, closed when the test ends.
func openTestIn(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// The walk of a damaged tree's branch pages ends: a branch page that
// names itself as each of its children (a loop, which a walk bounded by
// depth alone would follow 2^32 times), and one that names pages past
// the file's end, give no leaf and return at once.
func TestTheLeafWalkOfADamagedTreeEnds(t *testing.T) {
	const size = 4096
	file := make([]byte, 4*size)
	branch := func(id uint64, children ...uint64) {
		p := file[id*size:]
		binary.NativeEndian.PutUint64(p, id)
		binary.NativeEndian.PutUint16(p[8:], branchPageFlag)
		binary.NativeEndian.PutUint16(p[10:], uint16(len(children)))
		for i, c := range children {
			binary.NativeEndian.PutUint64(p[pageHeader+i*branchElement+8:], c)
		}
	}
	branch(2, 2, 2)
	branch(3, 3, 99, 1<<40)
	path := filepath.Join(t.TempDir(), "damaged")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := openTest(t)
	for _, root := range []uint64{2, 3} {
		w := pageWalk{f: f, size: size, pages: 4, seen: map[uint64]bool{}}
		if rs := w.leaves(root, 0, s); len(rs) != 0 {
			t.Fatalf("the walk from page %d found leaves %v in a tree of branch pages alone", root, rs)
		}
	}
}
