package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/internal/testbroker"
)

// run's HTTP server refuses to serve when http.tls.ca_file, the CA its
// clients' certificates must be signed by, cannot be read or holds no
// certificate; lint reads the file as run does and says so, rather than
// passing a configuration whose run stops at start.
func TestLintReadsTheHTTPClientCAFileAsRunDoes(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := testbroker.SelfSigned(t, dir)
	notPEM := filepath.Join(dir, "clients-ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, ca, want string // want: the problem's start, "" for none
	}{
		{"a file that does not exist", filepath.Join(dir, "none.pem"), "http.tls: tls.ca_file: open " + filepath.Join(dir, "none.pem")},
		{"a file without a certificate", notPEM, "http.tls: tls.ca_file " + notPEM + ": no PEM certificate in it"},
		{"a CA certificate", cert, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var runErr error
			if tc.want != "" { // run's server stops at once, saying why
				_, _, done := serveHTTPS(t, config.TLSConfig{CertFile: cert, KeyFile: key, CAFile: tc.ca})
				if runErr = <-done; runErr == nil {
					t.Fatal("run's server served")
				}
			}

			cfg, err := config.Parse([]byte("mqtt: {client_id: rg}\nhttp:\n  tls: {cert_file: '"+cert+"', key_file: '"+key+"', ca_file: '"+tc.ca+"'}\n"), "rg.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			ps := CheckLocal(cfg)
			switch {
			case tc.want == "" && len(ps) > 0:
				t.Errorf("CheckLocal = %v, want no problem", ps)
			case tc.want != "" && (len(ps) != 1 || !strings.HasPrefix(ps[0].Path+": "+ps[0].Message, tc.want)):
				t.Errorf("CheckLocal = %v, want one problem starting %q (run refuses: %v)", ps, tc.want, runErr)
			}
		})
	}
}
