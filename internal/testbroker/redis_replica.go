package testbroker

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// StartReplica starts another redis-server with the same options as r
// (the same durable flags) plus --replicaof r, and waits until r lists it
// online and the replica's link to r is up. Replication is asynchronous:
// a write r acknowledged may not be on the replica yet (WAIT tells when it
// is). A Restart of the replica starts it as r's replica again, even after
// Promote. It sets r's repl-diskless-sync-delay to 0, so that the first
// sync starts at once instead of after Redis's default 5 seconds.
func (r *Redis) StartReplica(tb testing.TB) *Redis {
	tb.Helper()
	if _, err := r.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0"); err != nil {
		tb.Fatalf("testbroker: CONFIG SET repl-diskless-sync-delay 0 on port %d: %v", r.port, err)
	}
	opts := r.opts
	opts.Port, opts.Dir = 0, ""
	opts.Extra = append(slices.Clone(r.opts.Extra), "--replicaof", "127.0.0.1", strconv.Itoa(r.port))
	rep := StartRedis(tb, opts)
	deadline := time.Now().Add(startTimeout)
	online := fmt.Sprintf("port=%d,state=online", rep.port)
	for {
		primary, err1 := r.Do("INFO", "replication")
		replica, err2 := rep.Do("INFO", "replication")
		if err1 == nil && err2 == nil && strings.Contains(fmt.Sprint(primary), online) &&
			strings.Contains(fmt.Sprint(replica), "master_link_status:up") {
			if err := r.awaitStream(rep.port); err != nil {
				tb.Fatalf("testbroker: the replica on port %d is online but acknowledges no write: %v", rep.port, err)
			}
			return rep
		}
		if time.Now().After(deadline) {
			tb.Fatalf("testbroker: the replica on port %d is not online after %v (%v, %v):\n%s\n%s",
				rep.port, startTimeout, err1, err2, primary, replica)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// awaitStream waits until the primary streams its writes to the replica
// on port: after a diskless sync the replica is online at once, but the
// primary sends it nothing until the replica's first REPLCONF ACK, up to a
// second later, and a write made meanwhile reaches it only then. A write
// to database 15, which no test reads, acknowledged by WAIT shows the
// stream flowing.
func (r *Redis) awaitStream(port int) error {
	c, err := dialRESP(r.Addr(), startTimeout)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Do("SELECT", "15"); err != nil {
		return err
	}
	if _, err := c.Do("SET", "testbroker:replica", strconv.Itoa(port)); err != nil {
		return err
	}
	deadline := time.Now().Add(startTimeout)
	for {
		n, err := c.Do("WAIT", "1", "100")
		if err != nil {
			return err
		}
		if v, ok := n.(int64); ok && v >= 1 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("WAIT 1 answered %v for %v", n, startTimeout)
		}
	}
}

// CutOffReplica stops rep, r's replica, with SIGSTOP, waits until it is
// stopped, and has r close its link to it (CLIENT KILL TYPE replica): from
// then on rep receives none of r's writes. A replica only paused would
// still find, once resumed, what r had sent into the link's socket
// buffers meanwhile, as much as they hold, so that a write made after the
// pause might reach it. Resume rep before Promote.
func (r *Redis) CutOffReplica(rep *Redis) {
	r.tb.Helper()
	rep.Pause()
	waitStopped(rep.proc.pid())
	n, err := r.Do("CLIENT", "KILL", "TYPE", "replica")
	if err != nil || n != int64(1) {
		r.tb.Fatalf("testbroker: CLIENT KILL TYPE replica on port %d: %v %v, want 1 link closed", r.port, n, err)
	}
}

// Promote makes a replica a primary of its own: REPLICAOF NO ONE. It keeps
// what it had received from its primary, and nothing more.
func (r *Redis) Promote() {
	r.tb.Helper()
	if v, err := r.Do("REPLICAOF", "NO", "ONE"); err != nil || v != "OK" {
		r.tb.Fatalf("testbroker: REPLICAOF NO ONE on port %d: %v %v", r.port, v, err)
	}
}

// Sentinel is a Redis Sentinel process (redis-server --sentinel) on a
// loopback port, monitoring one primary. It is killed at cleanup. Its
// methods are meant for the test goroutine.
type Sentinel struct {
	tb   testing.TB
	port int
	dir  string
	log  *SyncBuffer
	proc *child
}

// StartSentinel starts a Sentinel that monitors r under name, with a
// quorum of one and a down-after of a minute (a test that wants a
// failover promotes by hand), and waits until it names r as name's master.
func (r *Redis) StartSentinel(tb testing.TB, name string) *Sentinel {
	tb.Helper()
	s := &Sentinel{tb: tb, dir: tb.TempDir(), log: &SyncBuffer{}}
	tb.Cleanup(func() {
		s.proc.signalAndWait(syscall.SIGKILL)
		if tb.Failed() {
			tb.Logf("testbroker: sentinel on port %d logged:\n%s", s.port, tail(s.log.String(), 64<<10))
		}
	})
	startOnFreePort(tb, "redis sentinel", func(port int) error {
		s.port = port
		return s.tryStart(r, name)
	}, s.log.String)
	return s
}

// Addr is the Sentinel's host:port.
func (s *Sentinel) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port is the Sentinel's TCP port.
func (s *Sentinel) Port() int { return s.port }

func (s *Sentinel) tryStart(r *Redis, name string) error {
	conf := filepath.Join(s.dir, "sentinel.conf") // Sentinel rewrites it
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\n"+
		"sentinel down-after-milliseconds %s 60000\n", s.port, s.dir, name, r.port, name)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(r.bin, conf, "--sentinel")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = s.log, s.log
	p, err := startChild(cmd)
	if err != nil {
		return err
	}
	s.proc = p
	want := fmt.Sprintf("process_id:%d\r\n", p.pid())
	for deadline := time.Now().Add(startTimeout); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if !p.running() {
			return fmt.Errorf("redis sentinel exited at start")
		}
		info, err := s.do("INFO", "server")
		if err != nil {
			continue
		}
		if !strings.Contains(fmt.Sprint(info), want) {
			p.signalAndWait(syscall.SIGKILL)
			return fmt.Errorf("another process answers on port %d", s.port)
		}
		if addr, err := s.do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", name); err == nil &&
			fmt.Sprint(addr) == fmt.Sprint([]any{"127.0.0.1", strconv.Itoa(r.port)}) {
			return nil
		}
	}
	p.signalAndWait(syscall.SIGKILL)
	return fmt.Errorf("redis sentinel not ready after %v", startTimeout)
}

func (s *Sentinel) do(args ...string) (any, error) {
	c, err := dialRESP(s.Addr(), stopTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(args...)
}
