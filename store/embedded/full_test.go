package embedded_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/replayguard/replayguard/store/embedded"
)

// A store created on a full disk fails to open, naming the disk's error;
// once there is room, the next start creates it: the file the failed
// creation began never held a commit, and must not be left behind to be
// refused as too small for ever.
func TestAStoreCreatedOnAFullDiskOpensOnceThereIsRoom(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, 0) })
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 60<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "store")
	_, err := embedded.Open(dir, embedded.Options{})
	if err == nil || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("open on a full disk: %v, want the disk's error", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		t.Fatalf("open once there is room: %v", err)
	}
	if _, err := s.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
