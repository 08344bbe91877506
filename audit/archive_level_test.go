package audit_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit"
)

// TestAnArchiveGivenAtTheWrongLevelIsNamedSo gives a shared store's
// archive root for a single-owner store's chain, and one member's
// directory for a group's chains: each is said to be the wrong directory,
// never read as an archive whose segments are missing.
func TestAnArchiveGivenAtTheWrongLevelIsNamedSo(t *testing.T) {
	t.Run("a group's archive root for a single owner's chain", func(t *testing.T) {
		f, dir := archived(t)
		root := t.TempDir()
		if err := os.Rename(dir, filepath.Join(root, "member-m1")); err != nil {
			t.Fatal(err)
		}
		_, err := f.verify(t, root)
		wrongLevel(t, err, "member-m1")
	})
	t.Run("one member's directory for a group's chains", func(t *testing.T) {
		f, dir := newGroupFeed(t, "m1", "m2"), t.TempDir()
		f.decide(t, "m1", 1000)
		f.decide(t, "m2", 300)
		once(t, f.retention(t, f.members["m1"].m, dir, "m1", audit.RetentionOptions{MaxRecords: 100, SegmentRecords: 400}))
		_, err := audit.VerifyChainsWithArchive(t.Context(), audit.ChainDir(dir, "m1"), f.ro, f.ro)
		// It names no member's directory to give instead: the first
		// chain checked may have none there.
		wrongLevel(t, err, "member-m1", "give the directory that holds those (audit.archive), not one of them")
	})
}

func wrongLevel(t *testing.T, err error, words ...string) {
	t.Helper()
	t.Log(err)
	if !errors.Is(err, audit.ErrArchiveLevel) || errors.Is(err, audit.ErrBroken) || strings.Contains(err.Error(), "missing") {
		t.Fatalf("err = %v; want ErrArchiveLevel, not a break", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error does not say %q: %v", w, err)
		}
	}
}
