package testbroker

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pipelineSET sends SET key value for each i in [from, to) in one write and
// reads the replies: it returns how many the server acknowledged (OK).
func pipelineSET(t *testing.T, c *respConn, from, to int, value string) int {
	t.Helper()
	var b []byte
	for i := from; i < to; i++ {
		k := "k:" + strconv.Itoa(i)
		b = fmt.Appendf(b, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(k), k, len(value), value)
	}
	if _, err := c.c.Write(b); err != nil {
		t.Fatal(err)
	}
	ok := 0
	for i := from; i < to; i++ {
		v, err := c.read()
		if err != nil {
			t.Fatal(err)
		}
		if v == "OK" {
			ok++
		}
	}
	return ok
}

func dialFor(t *testing.T, r *Redis) *respConn {
	t.Helper()
	c, err := dialRESP(r.Addr(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustDo(t *testing.T, c *respConn, args ...string) any {
	t.Helper()
	v, err := c.Do(args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return v
}

// present returns which of keys k:i, i in idx, r holds.
func present(t *testing.T, r *Redis, idx []int) (missing []int) {
	t.Helper()
	c := dialFor(t, r)
	for _, i := range idx {
		if n := mustDo(t, c, "EXISTS", "k:"+strconv.Itoa(i)); n != int64(1) {
			missing = append(missing, i)
		}
	}
	return missing
}

func TestReplica(t *testing.T) {
	t.Run("a replica streams the primary's writes and a promoted one takes writes", func(t *testing.T) {
		p := StartRedis(t, RedisOptions{})
		rep := p.StartReplica(t)
		if got := configGetOne(t, rep, "appendfsync"); got != "always" {
			t.Fatalf("the replica runs with appendfsync %q, want the primary's durable flags", got)
		}
		c := dialFor(t, p)
		mustDo(t, c, "SET", "k:0", "v")
		if n := mustDo(t, c, "WAIT", "1", "5000"); n != int64(1) {
			t.Fatalf("WAIT 1 answered %v", n)
		}
		if _, err := rep.Do("SET", "k:1", "v"); err == nil || !strings.Contains(err.Error(), "READONLY") {
			t.Fatalf("a write to the replica: %v, want READONLY", err)
		}
		rep.Promote()
		if v, err := rep.Do("SET", "k:1", "v"); err != nil || v != "OK" {
			t.Fatalf("a write to the promoted replica: %v %v", v, err)
		}
		if missing := present(t, rep, []int{0, 1}); len(missing) != 0 {
			t.Fatalf("the promoted replica lacks %v", missing)
		}
	})

	// The loss is real: writes the primary acknowledged while its replica
	// was paused are gone once the primary dies and the replica is promoted.
	t.Run("a promoted replica lacks writes the primary acknowledged", func(t *testing.T) {
		p := StartRedis(t, RedisOptions{})
		rep := p.StartReplica(t)
		c := dialFor(t, p)
		const before, during = 1000, 20000
		acked := pipelineSET(t, c, 0, before, "v")
		if n := mustDo(t, c, "WAIT", "1", "5000"); n != int64(1) {
			t.Fatalf("WAIT 1 answered %v", n)
		}
		rep.Pause()
		value := strings.Repeat("x", 1024) // 20 MB: more than the sockets between them hold
		for i := before; i < before+during; i += 1000 {
			acked += pipelineSET(t, c, i, i+1000, value)
		}
		if acked != before+during {
			t.Fatalf("the primary acknowledged %d of %d writes", acked, before+during)
		}
		p.Kill()
		rep.Resume()
		rep.Promote()
		n, ok := mustDo(t, dialFor(t, rep), "DBSIZE").(int64)
		if !ok || n >= int64(acked) {
			t.Fatalf("the promoted replica holds %d keys of the %d acknowledged: no loss", n, acked)
		}
		t.Logf("the promoted replica holds %d of %d acknowledged writes: %d lost", n, acked, int64(acked)-n)
		first := make([]int, before)
		for i := range first {
			first[i] = i
		}
		if missing := present(t, rep, first); len(missing) != 0 {
			t.Fatalf("writes WAIT had acknowledged are missing: %v", missing)
		}
	})

	t.Run("no write that WAIT 1 acknowledged is lost", func(t *testing.T) {
		p := StartRedis(t, RedisOptions{})
		rep := p.StartReplica(t)
		c := dialFor(t, p)
		const before, during = 200, 30
		var acked, refused []int
		for i := range before + during {
			if i == before {
				rep.Pause()
			}
			mustDo(t, c, "SET", "k:"+strconv.Itoa(i), strings.Repeat("x", 1024))
			timeout := "5000"
			if i >= before {
				timeout = "20"
			}
			switch mustDo(t, c, "WAIT", "1", timeout) {
			case int64(1):
				acked = append(acked, i)
			case int64(0):
				refused = append(refused, i)
			default:
				t.Fatal("WAIT answered neither 0 nor 1")
			}
		}
		if len(acked) != before || len(refused) != during {
			t.Fatalf("WAIT acknowledged %d writes and refused %d; want %d and %d (the replica paused)",
				len(acked), len(refused), before, during)
		}
		p.Kill()
		rep.Resume()
		rep.Promote()
		if missing := present(t, rep, acked); len(missing) != 0 {
			t.Fatalf("the promoted replica lacks %d writes WAIT acknowledged: %v", len(missing), missing)
		}
		t.Logf("every one of %d writes WAIT acknowledged survived; %d unacknowledged ones: %d lost",
			len(acked), len(refused), len(present(t, rep, refused)))
	})
}

func TestSentinel(t *testing.T) {
	p := StartRedis(t, RedisOptions{})
	s := p.StartSentinel(t, "rg")
	v, err := s.do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", "rg")
	if err != nil || fmt.Sprint(v) != fmt.Sprint([]any{"127.0.0.1", strconv.Itoa(p.Port())}) {
		t.Fatalf("the sentinel names %v (%v), want %s", v, err, p.Addr())
	}
}

func configGetOne(t *testing.T, r *Redis, name string) string {
	t.Helper()
	v, err := r.Do("CONFIG", "GET", name)
	a, ok := v.([]any)
	if err != nil || !ok || len(a) != 2 {
		t.Fatalf("CONFIG GET %s = %#v, %v", name, v, err)
	}
	s, _ := a[1].(string)
	return s
}
