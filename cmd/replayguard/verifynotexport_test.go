package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestAuditVerifyOfAFileThatIsNoExportSaysSo: `audit verify --file` given
// a JSON file that is not an audit export (a captured feed, another
// program's JSON) says the file is not one and why, naming the file and
// the line, and exits 1, rather than report a broken chain.
func TestAuditVerifyOfAFileThatIsNoExportSaysSo(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, text, want string }{
		{"a captured feed", `{"topic":"incidents/fd/e1","payload":{"sequence":1}}` + "\n",
			`: not an audit export: line 1 has no "position"` + "\n"},
		{"records with a position but no hash", `{"position":1,"outcome":"applied"}` + "\n",
			`: not an audit export: line 1 has no "hash"` + "\n"},
		{"a JSON array", "[1,2]\n",
			": not an audit export: line 1 is not an audit record (json: cannot unmarshal array into Go value of type engine.AuditRecord)\n"},
		{"plain text", "hello\n",
			": not an audit export: line 1 is not an audit record (invalid character 'h' looking for beginning of value)\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "file.json")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			_, errs, code := cli(t, "", "audit", "verify", "--file", path)
			if want := "replayguard audit: " + path + tc.want; code != 1 || errs != want {
				t.Fatalf("exit %d, stderr %q; want exit 1, %q", code, errs, want)
			}
		})
	}
}
