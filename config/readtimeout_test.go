package config

import (
	"slices"
	"testing"
	"time"
)

// store.read_timeout is read, defaults to 5s on a shared store, and a
// value that is no positive duration of 100ms or more is refused, naming
// the setting and its line.
func TestTheStoreReadTimeoutIsReadAndValidated(t *testing.T) {
	t.Run("a value on a shared store is read", func(t *testing.T) {
		c, err := Parse([]byte("store: {kind: postgres, url: 'postgres://h/d', read_timeout: 12s}\n"), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Store.ReadTimeout.Std(); got != 12*time.Second {
			t.Fatalf("store.read_timeout %v, want 12s", got)
		}
	})
	t.Run("a shared store without it reads for 5s", func(t *testing.T) {
		c, err := Parse([]byte("store: {kind: redis, url: 'redis://h'}\n"), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Store.ReadTimeout; got != DefaultReadTimeout || got.Std() != 5*time.Second {
			t.Fatalf("store.read_timeout %v, want the default 5s", got)
		}
	})
	t.Run("the embedded store has none", func(t *testing.T) {
		c, err := Parse([]byte("store: {kind: embedded}\n"), "f.yaml", nil)
		if err != nil {
			t.Fatal(err)
		}
		if c.Store.ReadTimeout != 0 {
			t.Fatalf("store.read_timeout %v on the embedded store, want none", c.Store.ReadTimeout)
		}
	})
	shared := "store: {kind: redis, url: 'redis://h', "
	for _, tc := range []struct{ name, file, want string }{
		{"a negative value is refused", shared + "read_timeout: -5s}",
			`store.read_timeout: duration "-5s" is negative`},
		{"a bare number is refused", shared + "read_timeout: 5}",
			`store.read_timeout: duration "5" has no unit: write 5s, 5m or 5h`},
		{"a word is refused", shared + "read_timeout: soon}",
			`store.read_timeout: invalid duration "soon": want a number with a unit (ns, us, ms, s, m, h), like 90s or 1h30m`},
		{"a zero is refused", shared + "read_timeout: 0s}",
			"store.read_timeout: read_timeout is 0: remove it to use the default (5s), or set a positive value"},
		{"a bound below 100ms is refused", shared + "read_timeout: 10ms}",
			"store.read_timeout: read_timeout 10ms is below 100ms"},
		{"the embedded store refuses it", "store: {kind: embedded, read_timeout: 5s}",
			"store.read_timeout: read_timeout is for a shared store (kind redis or postgres), not kind embedded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := problemsOf(t, tc.file); !slices.Equal(got, []string{tc.want}) {
				t.Fatalf("problems %q, want [%q]", got, tc.want)
			}
		})
	}
}
