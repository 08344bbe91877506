package sink_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

// An audit file made append-only (chattr +a, a common guard for an audit
// trail) cannot be truncated: a partial last line left by a crash must not
// stop the sink for good; the next record starts on a line of its own.
func TestFileOnAnAppendOnlyFileWithAPartialLineStillDelivers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	if err := os.WriteFile(path, []byte(`{"position":1}`+"\n"+`{"posit`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+a", path).CombinedOutput(); err != nil {
		t.Skipf("chattr +a: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-a", path).Run() })
	w := sink.NewFile(sink.FileOptions{Path: path})
	defer w.Close(context.Background())
	rec := engine.AuditRecord{Position: 2, Route: "meters", Outcome: "applied", Member: "rg-1"}
	if err := w.Export(context.Background(), []engine.AuditRecord{rec}); err != nil {
		t.Fatalf("export to an append-only file after a crash: %v (the sink retries for ever)", err)
	}
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.HasPrefix(last, `{`) || !strings.Contains(last, `"position":2`) {
		t.Fatalf("last line %q: record 2 glued to the partial line", last)
	}
}
