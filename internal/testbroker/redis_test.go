package testbroker_test

import (
	"errors"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// do runs one command on r and fails the test on an error.
func do(t *testing.T, r *testbroker.Redis, args ...string) any {
	t.Helper()
	v, err := r.Do(args...)
	if err != nil {
		t.Fatalf("%v: %v", args, err)
	}
	return v
}

func configGet(t *testing.T, r *testbroker.Redis, name string) any {
	t.Helper()
	v, ok := do(t, r, "CONFIG", "GET", name).([]any)
	if !ok || len(v) != 2 {
		t.Fatalf("CONFIG GET %s = %#v", name, v)
	}
	return v[1]
}

func TestRedis(t *testing.T) {
	t.Run("an acknowledged write survives a crash", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{})
		if got := do(t, r, "SET", "replayguard:k", "v1"); got != "OK" {
			t.Fatalf("SET = %#v", got)
		}
		port := r.Port()
		r.Kill()
		if r.Running() {
			t.Fatal("running after Kill")
		}
		if _, err := r.Do("PING"); err == nil {
			t.Fatal("PING answered after Kill")
		}
		r.Restart()
		if r.Port() != port {
			t.Fatalf("restarted on port %d, want %d", r.Port(), port)
		}
		if got := do(t, r, "GET", "replayguard:k"); got != "v1" {
			t.Fatalf("GET after a crash = %#v, want the acknowledged \"v1\"", got)
		}
		if len(r.AOFFiles()) == 0 {
			t.Errorf("no append-only file under %s", r.Dir())
		}
	})

	t.Run("a non-durable server loses its writes in a crash", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{NonDurable: true})
		do(t, r, "SET", "replayguard:k", "v1")
		r.Kill()
		r.Restart()
		if got := do(t, r, "GET", "replayguard:k"); got != nil {
			t.Fatalf("GET after a crash = %#v, want nil: nothing was persisted", got)
		}
	})

	t.Run("the default configuration is the durable one", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{})
		for name, want := range map[string]string{
			"appendonly":       "yes",
			"appendfsync":      "always",
			"maxmemory-policy": "noeviction",
			"save":             "",
			"dir":              r.Dir(),
		} {
			if got := configGet(t, r, name); got != want {
				t.Errorf("%s = %#v, want %q", name, got, want)
			}
		}
		if want := "redis://" + r.Addr() + "/0"; r.URL() != want {
			t.Errorf("URL() = %q, want %q", r.URL(), want)
		}
	})

	t.Run("NonDurable and Extra give the settings a store must refuse", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{
			NonDurable: true,
			Extra:      []string{"--maxmemory-policy", "allkeys-lru"},
		})
		for name, want := range map[string]string{
			"appendonly":       "no",
			"appendfsync":      "everysec",
			"maxmemory-policy": "allkeys-lru",
		} {
			if got := configGet(t, r, name); got != want {
				t.Errorf("%s = %#v, want %q", name, got, want)
			}
		}
	})

	t.Run("a clean stop and restart keeps the data", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{})
		do(t, r, "RPUSH", "replayguard:l", "a", "b")
		r.Restart() // SIGTERM, then the same directory and port
		got := do(t, r, "LRANGE", "replayguard:l", "0", "-1")
		if want := []any{"a", "b"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("LRANGE = %#v, want %#v", got, want)
		}
	})

	t.Run("a paused server answers nothing until resumed", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{})
		c, err := net.Dial("tcp", r.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r.Pause()
		if _, err := c.Write([]byte("PING\r\n")); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		buf := make([]byte, 16)
		if n, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("paused server: read %q, %v; want a timeout", buf[:n], err)
		}
		r.Resume()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := c.Read(buf)
		if err != nil || string(buf[:n]) != "+PONG\r\n" {
			t.Fatalf("resumed server: read %q, %v; want +PONG", buf[:n], err)
		}
	})

	t.Run("an error reply is a RESPError", func(t *testing.T) {
		r := testbroker.StartRedis(t, testbroker.RedisOptions{})
		do(t, r, "SET", "replayguard:s", "x")
		_, err := r.Do("INCR", "replayguard:s")
		var e testbroker.RESPError
		if !errors.As(err, &e) {
			t.Fatalf("INCR of a string: %v, want a RESPError", err)
		}
		if got := do(t, r, "GET", "replayguard:absent"); got != nil {
			t.Fatalf("GET of an absent key = %#v, want nil", got)
		}
	})
}
