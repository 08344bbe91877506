package testbroker

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

const snapshotTimeout = 10 * time.Second

// SnapshotDB waits for the broker's next autosave and returns a copy of the
// persistence file it wrote, in a temporary directory. The copy is the state
// a standby restored from a periodic backup would have: everything up to that
// save, nothing after it.
//
// Mosquitto writes mosquitto.db.new and renames it over mosquitto.db, so a
// change of the file's identity or modification time means a complete save.
func (m *Mosquitto) SnapshotDB() string {
	m.tb.Helper()
	path := m.DBPath()
	before, _ := os.Stat(path)
	deadline := time.Now().Add(snapshotTimeout)
	for {
		after, err := os.Stat(path)
		if err == nil && (before == nil || !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime())) {
			return copyToTemp(m.tb, path)
		}
		if time.Now().After(deadline) {
			m.tb.Fatalf("testbroker: no autosave of %s within %v", path, snapshotTimeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CopyDB returns a copy of the broker's last complete save, in a temporary
// directory, without waiting for the next one (it waits for a first save
// when there is none yet): the state of a standby restored from the latest
// periodic backup, up to an autosave interval older than the broker.
func (m *Mosquitto) CopyDB() string {
	m.tb.Helper()
	if _, err := os.Stat(m.DBPath()); err != nil {
		return m.SnapshotDB()
	}
	return copyToTemp(m.tb, m.DBPath())
}

// copyToTemp copies path into a new temporary directory. The file is opened
// once, so a rename over path during the copy does not mix two saves.
func copyToTemp(tb testing.TB, path string) string {
	tb.Helper()
	src, err := os.Open(path)
	if err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	defer src.Close()
	dst := filepath.Join(tb.TempDir(), dbFile)
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	if _, err := io.Copy(out, src); err != nil {
		tb.Fatalf("testbroker: copy %s: %v", path, err)
	}
	if err := out.Close(); err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	return dst
}

// StartFromSnapshot starts a standby broker on a new port from a copy of a
// persistence file (from SnapshotDB), with the default options. The snapshot
// itself is not modified.
func StartFromSnapshot(tb testing.TB, snapshot string) *Mosquitto {
	tb.Helper()
	return StartFromSnapshotWith(tb, snapshot, MosquittoOptions{})
}

// StartFromSnapshotWith is StartFromSnapshot with options; opts.Dir is
// replaced by a new temporary directory holding the copy.
func StartFromSnapshotWith(tb testing.TB, snapshot string, opts MosquittoOptions) *Mosquitto {
	tb.Helper()
	copied := copyToTemp(tb, snapshot)
	opts.Dir = filepath.Dir(copied)
	return StartMosquitto(tb, opts)
}

// startOnFreePort calls try with a free port until it starts the server,
// three times at most: a port free a moment ago may be taken before the
// server binds it. log is the server's output, printed when it never starts.
func startOnFreePort(tb testing.TB, what string, try func(port int) error, log func() string) {
	tb.Helper()
	for attempt := 0; ; attempt++ {
		err := try(FreePort(tb))
		if err == nil {
			return
		}
		if attempt == 2 {
			tb.Fatalf("testbroker: start %s: %v\n%s", what, err, log())
		}
	}
}

// RestartFrom starts the broker again on the same port and directory, but
// from a copy of an older persistence file (from SnapshotDB) instead of its
// own: the restart of a broker whose last save predates acknowledgements it
// had received, such as a restore from a periodic backup. A running broker
// is killed first, so that it cannot save over the copy on its way out.
func (m *Mosquitto) RestartFrom(snapshot string) {
	m.tb.Helper()
	if m.Running() {
		m.Kill()
	}
	if err := copyFile(snapshot, m.DBPath()); err != nil {
		m.tb.Fatalf("testbroker: restore %s: %v", snapshot, err)
	}
	m.Restart()
}

// copyFile replaces dst with a copy of src.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
