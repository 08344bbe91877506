package testbroker

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkPostgresDataDir compares the two ways to give a server a data
// directory: initdb (what the template costs once per test binary) and the
// copy of the template (what each StartPostgres pays); start is all of
// StartPostgres, the copy included, until the server answers.
func BenchmarkPostgresDataDir(b *testing.B) {
	binDir := PostgresBinDir(b)
	cred := postgresCredential(b)
	tmpl, _, err := postgresTemplate(binDir, cred)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("initdb", func(b *testing.B) {
		for b.Loop() {
			dir := filepath.Join(tmpl.dataBase, "bench")
			wal := ""
			if tmpl.wal != "" {
				wal = filepath.Join(tmpl.walBase, "bench-wal")
			}
			if out, err := initdb(binDir, dir, wal, cred).CombinedOutput(); err != nil {
				b.Fatalf("initdb: %v\n%s", err, out)
			}
			b.StopTimer()
			_ = os.RemoveAll(dir)
			_ = os.RemoveAll(wal)
			b.StartTimer()
		}
	})
	b.Run("copy", func(b *testing.B) {
		for b.Loop() {
			_, remove, err := tmpl.copyTo(cred)
			if err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			remove()
			b.StartTimer()
		}
	})
	b.Run("start", func(b *testing.B) {
		for b.Loop() {
			p := StartPostgres(b, PostgresOptions{})
			b.StopTimer()
			p.Kill()
			b.StartTimer()
		}
	})
}
