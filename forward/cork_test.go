package forward

import (
	"errors"
	"net"
	"testing"
)

// countConn counts the writes that reach it, and fails them with err.
type countConn struct {
	net.Conn
	writes [][]byte
	err    error
}

func (c *countConn) Write(p []byte) (int, error) {
	c.writes = append(c.writes, append([]byte(nil), p...))
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

func TestCorkConn(t *testing.T) {
	t.Run("writes while corked reach the connection in one write at uncork, in order", func(t *testing.T) {
		under := &countConn{}
		c := &corkConn{Conn: under}
		c.Cork()
		for _, p := range []string{"ab", "c", "def"} {
			if n, err := c.Write([]byte(p)); n != len(p) || err != nil {
				t.Fatalf("Write(%q) = %d, %v", p, n, err)
			}
		}
		if len(under.writes) != 0 {
			t.Fatalf("%d writes reached the connection while corked", len(under.writes))
		}
		if err := c.Uncork(); err != nil {
			t.Fatal(err)
		}
		if len(under.writes) != 1 || string(under.writes[0]) != "abcdef" {
			t.Fatalf("writes %q, want one of \"abcdef\"", under.writes)
		}
		if err := c.Uncork(); err != nil || len(under.writes) != 1 {
			t.Fatalf("a second uncork wrote again (%v, %d writes)", err, len(under.writes))
		}
	})
	t.Run("uncorked, a write goes straight through", func(t *testing.T) {
		under := &countConn{}
		c := &corkConn{Conn: under}
		c.Write([]byte("x"))
		if len(under.writes) != 1 {
			t.Fatalf("%d writes, want 1", len(under.writes))
		}
	})
	t.Run("the connection's error comes from uncork", func(t *testing.T) {
		broken := errors.New("broken pipe")
		c := &corkConn{Conn: &countConn{err: broken}}
		c.Cork()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatalf("a corked write failed: %v", err)
		}
		if err := c.Uncork(); !errors.Is(err, broken) {
			t.Fatalf("Uncork = %v, want the connection's error", err)
		}
	})
}
