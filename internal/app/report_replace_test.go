//go:build unix

package app

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAReportWrittenOverAFileKeepsWhatItWas: a report written over an
// earlier file keeps that file's permissions (a report kept 0600 is not
// made readable by everyone), a new one is created as os.Create would
// (0666 less the umask), and a symlink at the path is written through:
// the file it names is replaced, the link stays.
func TestAReportWrittenOverAFileKeepsWhatItWas(t *testing.T) {
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	dir := t.TempDir()

	fresh := filepath.Join(dir, "fresh.html")
	if err := writeFileWhole(fresh, write("new")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a new report under umask 077: %v, %v; want mode 0600", fi.Mode(), err)
	}

	private := filepath.Join(dir, "private.html")
	if err := os.WriteFile(private, []byte("earlier"), 0o600); err != nil {
		t.Fatal(err)
	}
	syscall.Umask(0o022)
	if err := writeFileWhole(private, write("later")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(private); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("a report written over a 0600 one: %v, %v; want it kept 0600", fi.Mode(), err)
	}

	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(shared, "report.html")
	if err := os.WriteFile(target, []byte("earlier"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "report.html")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := writeFileWhole(link, write("later")); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the symlink at the path: %v, %v; want it kept", fi.Mode(), err)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "later" {
		t.Fatalf("the file the symlink names holds %q, %v; want the report", b, err)
	}
	for _, d := range []string{dir, shared} {
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if filepath.Ext(e.Name()) != ".html" && !e.IsDir() {
				t.Errorf("left behind in %s: %s", d, e.Name())
			}
		}
	}
}
