package embedded_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

var damageRoutes = []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}}}}

// damagedStore writes a store of some pages in dir, closes it, and applies
// damage to its file.
func damagedStore(t *testing.T, dir string, damage func(f *os.File, size int64) error) string {
	t.Helper()
	s := open(t, dir, embedded.Options{})
	e, err := engine.New(t.Context(), s, engine.Options{Routes: damageRoutes, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < 3000; n += 100 {
		msgs := make([]engine.Message, 100)
		for j := range msgs {
			msgs[j] = engine.Message{Topic: fmt.Sprintf("plant/m-%d/energy", (n+j)%50), Payload: fmt.Appendf(nil, `{"msgId":"r-%d","kwh":1}`, n+j)}
		}
		if _, err := e.Process(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, embedded.FileName)
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if err := damage(f, st.Size()); err != nil {
		t.Fatal(err)
	}
	return path
}

// A store file a disk fault damaged while replayguard was stopped (pages
// zeroed, or the file cut short) is refused at start with an error that
// names the file and says what to do: never a panic or a fault that kills
// the process with a stack trace, and never a start on windows it cannot
// read.
func TestAStoreFileDamagedWhileStoppedIsRefusedNamingTheFile(t *testing.T) {
	const page = 4096
	for name, damage := range map[string]func(f *os.File, size int64) error{
		"both meta pages zeroed": func(f *os.File, _ int64) error {
			_, err := f.WriteAt(make([]byte, 2*page), 0)
			return err
		},
		"the pages after the meta pages zeroed": func(f *os.File, size int64) error {
			_, err := f.WriteAt(make([]byte, size-2*page), 2*page)
			return err
		},
		"the file cut short to half": func(f *os.File, size int64) error {
			return f.Truncate(size / 2)
		},
		"the file cut short to its meta pages": func(f *os.File, _ int64) error {
			return f.Truncate(2 * page)
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := damagedStore(t, dir, damage)
			err := openAndLoad(t, dir)
			if !errors.Is(err, embedded.ErrDamaged) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "restore") {
				t.Fatalf("open and load a damaged store: %v, want ErrDamaged naming %s and what to do", err, path)
			}
		})
	}
}

// openAndLoad opens the store in dir and loads it, as run does at start.
func openAndLoad(t *testing.T, dir string) error {
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	_, err = s.Load(t.Context())
	return err
}
