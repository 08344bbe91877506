package testbroker

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// RedisEnv names an environment variable that, when set, is the path of the
// redis-server binary to run instead of the one found on PATH.
const RedisEnv = "REPLAYGUARD_REDIS"

// RedisOptions configures a redis-server process. The zero value is the
// durable configuration a shared store requires: an append-only file synced
// on every write (appendonly yes, appendfsync always), no RDB snapshots and
// maxmemory-policy noeviction.
type RedisOptions struct {
	// Port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int
	// Dir is the server's working directory (--dir), holding the
	// append-only files. Empty means a new temporary directory removed at
	// cleanup.
	Dir string
	// NonDurable runs with Redis's own defaults instead: appendonly no,
	// appendfsync everysec, the configuration a store must refuse.
	NonDurable bool
	// Extra command-line arguments, appended as they are after the
	// defaults, which they override: {"--maxmemory-policy", "allkeys-lru"}.
	Extra []string
}

// Redis is a redis-server running as a child process on a loopback port.
// Its methods are meant for the test goroutine; they fail the test on error.
// The process is killed at cleanup, and its log is printed when the test has
// failed.
type Redis struct {
	tb   testing.TB
	bin  string
	opts RedisOptions
	port int
	dir  string
	log  *SyncBuffer
	proc *child
}

// RedisPath returns the redis-server binary to run. When there is none, it
// skips the test, or fails it when REPLAYGUARD_REQUIRE_SERVICES=1.
func RedisPath(tb testing.TB) string {
	tb.Helper()
	return binary(tb, RedisEnv, "redis-server", "/usr/bin/redis-server", "/usr/local/bin/redis-server")
}

// StartRedis starts a redis-server and waits until it answers PING, which it
// does only once its append-only file is loaded.
func StartRedis(tb testing.TB, opts RedisOptions) *Redis {
	tb.Helper()
	r := &Redis{tb: tb, bin: RedisPath(tb), opts: opts, dir: opts.Dir, log: &SyncBuffer{}}
	if r.dir == "" {
		r.dir = tb.TempDir()
	}
	tb.Cleanup(r.cleanup)
	if opts.Port != 0 {
		r.port = opts.Port
		r.start()
		return r
	}
	startOnFreePort(tb, "redis", func(port int) error { r.port = port; return r.tryStart() }, r.Log)
	return r
}

// URL is the server's address for Redis clients: redis://127.0.0.1:PORT/0.
func (r *Redis) URL() string { return "redis://" + r.Addr() + "/0" }

// Addr is the server's host:port.
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port is the server's TCP port.
func (r *Redis) Port() int { return r.port }

// Dir is the server's working directory, holding its append-only files.
func (r *Redis) Dir() string { return r.dir }

// Log returns what the server has written to stdout and stderr, over all
// restarts.
func (r *Redis) Log() string { return r.log.String() }

// Running reports whether the server process is alive (possibly paused).
func (r *Redis) Running() bool { return r.proc.running() }

// Do sends one command on a new connection and returns its reply: a string
// (simple or bulk), an int64, nil, a []any, or a RESPError.
func (r *Redis) Do(args ...string) (any, error) {
	c, err := dialRESP(r.Addr(), stopTimeout)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.Do(args...)
}

// Kill ends the server with SIGKILL: a crash. With the default options
// every write it acknowledged is in the append-only file already.
func (r *Redis) Kill() { r.tb.Helper(); r.proc.signalAndWait(syscall.SIGKILL) }

// Stop ends the server with SIGTERM and waits for it to exit.
func (r *Redis) Stop() { r.tb.Helper(); r.proc.signalAndWait(syscall.SIGTERM) }

// Pause freezes the server with SIGSTOP: connections stay open but nothing
// is answered.
func (r *Redis) Pause() { r.tb.Helper(); r.proc.signal(r.tb, syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (r *Redis) Resume() { r.tb.Helper(); r.proc.signal(r.tb, syscall.SIGCONT) }

// Restart starts the server again on the same port and directory, so that it
// replays its append-only file. A running server is stopped with SIGTERM
// first; call Kill before for a crash.
func (r *Redis) Restart() {
	r.tb.Helper()
	if r.Running() {
		r.Stop()
	}
	r.log.WriteString("--- testbroker: restart ---\n")
	r.start()
}

func (r *Redis) start() {
	r.tb.Helper()
	if err := r.tryStart(); err != nil {
		r.tb.Fatalf("testbroker: start redis on port %d: %v\n%s", r.port, err, r.Log())
	}
}

func (r *Redis) tryStart() error {
	cmd := exec.Command(r.bin, r.args()...)
	cmd.Dir = r.dir
	cmd.Stdout, cmd.Stderr = r.log, r.log
	p, err := startChild(cmd)
	if err != nil {
		return err
	}
	r.proc = p
	if err := r.waitReady(); err != nil {
		p.signalAndWait(syscall.SIGKILL)
		return err
	}
	return nil
}

func (r *Redis) args() []string {
	args := []string{
		"--port", strconv.Itoa(r.port),
		"--bind", "127.0.0.1",
		"--dir", r.dir,
		"--daemonize", "no",
		"--logfile", "",
		"--save", "",
		"--maxmemory-policy", "noeviction",
	}
	if r.opts.NonDurable {
		args = append(args, "--appendonly", "no", "--appendfsync", "everysec")
	} else {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	}
	return append(args, r.opts.Extra...)
}

// waitReady waits until this process, not another one that took the port,
// answers PING with PONG: a server still loading its append-only file
// answers -LOADING.
func (r *Redis) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	want := fmt.Sprintf("process_id:%d\r\n", r.proc.pid())
	var last error
	for time.Now().Before(deadline) {
		if !r.proc.running() {
			return fmt.Errorf("redis-server exited at start")
		}
		info, err := r.Do("INFO", "server")
		if err == nil && !strings.Contains(fmt.Sprint(info), want) {
			return fmt.Errorf("another process answers on port %d", r.port)
		}
		if err == nil {
			var pong any
			if pong, err = r.Do("PING"); err == nil && pong == "PONG" {
				return nil
			}
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server not ready after %v: %v", startTimeout, last)
}

func (r *Redis) cleanup() {
	r.proc.signalAndWait(syscall.SIGKILL)
	if r.tb.Failed() {
		r.tb.Logf("testbroker: redis on port %d (dir %s) logged:\n%s", r.port, r.dir, tail(r.Log(), 64<<10))
	}
}

// AOFFiles lists the append-only files under Dir, relative to it.
func (r *Redis) AOFFiles() []string {
	var files []string
	_ = filepath.WalkDir(r.dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.Contains(d.Name(), ".aof") {
			rel, _ := filepath.Rel(r.dir, path)
			files = append(files, rel)
		}
		return nil
	})
	return files
}
