package app

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/replayguard/replayguard/internal/report"
)

// TestReportToAFullDiskLeavesNoPartialFile: `report -o FILE` whose write
// fails part way (a full disk) fails, and leaves neither a truncated report
// under FILE that reads as the whole nor a temporary file beside it; a
// report already there stays as it was. One that succeeds is there whole.
func TestReportToAFullDiskLeavesNoPartialFile(t *testing.T) {
	dir := t.TempDir()
	tool := meterTool(t, dir, "add: {kwh: kwh}")
	ingest(t, tool, `{"topic":"plant/meter-1/energy","payload":{"msgId":"m-1","kwh":0.25}}`+"\n")
	out := filepath.Join(dir, "out")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "report.json")

	if err := tool.Report(t.Context(), ReportOptions{Format: "json", Output: path}); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(path)
	if err != nil || !bytes.HasSuffix(whole, []byte("}\n")) {
		t.Fatalf("report written: %v %q", err, whole)
	}

	full := syscall.ENOSPC
	writeReportTo = func(w io.Writer, rep *report.Report, format string) error {
		var b bytes.Buffer
		if err := writeReport(&b, rep, format); err != nil {
			return err
		}
		if _, err := w.Write(b.Bytes()[:b.Len()/2]); err != nil {
			return err
		}
		return full
	}
	t.Cleanup(func() { writeReportTo = writeReport })

	err = tool.Report(t.Context(), ReportOptions{Format: "json", Output: path})
	if !errors.Is(err, full) || !strings.Contains(err.Error(), path) {
		t.Fatalf("report to a full disk: %v, want the disk's error naming %s", err, path)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, whole) {
		t.Fatalf("the report already there was changed by a failed write: %d bytes, was %d", len(got), len(whole))
	}
	if ents, _ := os.ReadDir(out); len(ents) != 1 {
		t.Fatalf("the failed write left files beside the report: %v", ents)
	}

	fresh := filepath.Join(out, "fresh.html")
	if err := tool.Report(t.Context(), ReportOptions{Output: fresh}); !errors.Is(err, full) {
		t.Fatalf("report to a full disk: %v", err)
	}
	if _, err := os.Stat(fresh); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed report left %s behind: %v", fresh, err)
	}
}
