package testbroker

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireServicesEnv names the environment variable that turns a missing
// server binary from a skipped test into a failed one.
const RequireServicesEnv = "REPLAYGUARD_REQUIRE_SERVICES"

// MosquittoEnv names an environment variable that, when set, is the path of
// the mosquitto binary to run instead of the one found on PATH.
const MosquittoEnv = "REPLAYGUARD_MOSQUITTO"

const (
	startTimeout = 10 * time.Second
	stopTimeout  = 10 * time.Second
	dbFile       = "mosquitto.db"
)

// MosquittoOptions configures a Mosquitto process. The zero value is the
// configuration of the failover tests: persistence on, an autosave every
// second, no queue limit and 100 messages in flight per client.
type MosquittoOptions struct {
	// Port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int
	// Dir holds the configuration, the log and the persistence file.
	// Empty means a new temporary directory removed at cleanup.
	Dir string
	// AutosaveInterval between snapshots of the in-memory database. Zero
	// means 1 s (Mosquitto saves every 1–2 s then).
	AutosaveInterval time.Duration
	// MaxInflight is max_inflight_messages. Zero means 100.
	MaxInflight int
	// NoPersistence runs the broker without a persistence file.
	NoPersistence bool
	// Verbose logs every packet (log_type all); the log is printed only
	// when the test fails.
	Verbose bool
	// Extra configuration lines, appended as they are.
	Extra []string
}

// Mosquitto is a Mosquitto broker running as a child process on a loopback
// port. Its methods are meant for the test goroutine; they fail the test on
// error. The process is killed at cleanup, and its log is printed when the
// test has failed.
type Mosquitto struct {
	tb   testing.TB
	bin  string
	opts MosquittoOptions
	port int
	dir  string
	log  *SyncBuffer

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

// MosquittoPath returns the mosquitto binary to run. When there is none, it
// skips the test, or fails it when REPLAYGUARD_REQUIRE_SERVICES=1.
func MosquittoPath(tb testing.TB) string {
	tb.Helper()
	return binary(tb, MosquittoEnv, "mosquitto", "/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto")
}

// binary returns the server binary to run: the one the environment
// variable env names, else name on PATH, else the first of places that
// exists. When there is none, it skips the test, or fails it when
// REPLAYGUARD_REQUIRE_SERVICES=1.
func binary(tb testing.TB, env, name string, places ...string) string {
	tb.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			missing(tb, p)
		}
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, p := range places {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	missing(tb, name)
	return ""
}

func missing(tb testing.TB, what string) {
	tb.Helper()
	if os.Getenv(RequireServicesEnv) == "1" {
		tb.Fatalf("%s not found and %s=1", what, RequireServicesEnv)
	}
	tb.Skipf("%s not found (set %s=1 to fail instead)", what, RequireServicesEnv)
}

// StartMosquitto starts a broker and waits until it accepts connections.
func StartMosquitto(tb testing.TB, opts MosquittoOptions) *Mosquitto {
	tb.Helper()
	m := &Mosquitto{tb: tb, bin: MosquittoPath(tb), opts: opts, dir: opts.Dir, log: &SyncBuffer{}}
	if m.dir == "" {
		m.dir = tb.TempDir()
	}
	tb.Cleanup(m.cleanup)
	if opts.Port != 0 {
		m.port = opts.Port
		m.start()
		return m
	}
	startOnFreePort(tb, "mosquitto", func(port int) error { m.port = port; return m.tryStart() }, m.Log)
	return m
}

// URL is the broker's address for MQTT clients: tcp://127.0.0.1:PORT.
func (m *Mosquitto) URL() string { return "tcp://" + m.Addr() }

// Addr is the broker's host:port.
func (m *Mosquitto) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.port)) }

// Port is the broker's TCP port.
func (m *Mosquitto) Port() int { return m.port }

// Dir is the directory holding the configuration and the persistence file.
func (m *Mosquitto) Dir() string { return m.dir }

// DBPath is the persistence file.
func (m *Mosquitto) DBPath() string { return filepath.Join(m.dir, dbFile) }

// LogPath is the broker's log file, appended to over restarts.
func (m *Mosquitto) LogPath() string { return filepath.Join(m.dir, "mosquitto.log") }

// Log returns everything the broker has logged so far, over all restarts,
// then what the process wrote to stdout and stderr.
func (m *Mosquitto) Log() string {
	b, _ := os.ReadFile(m.LogPath())
	return string(b) + m.log.String()
}

// Running reports whether the broker process is alive (possibly paused).
func (m *Mosquitto) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runningLocked()
}

func (m *Mosquitto) runningLocked() bool {
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Kill ends the broker with SIGKILL: a crash. What the last autosave did
// not write is lost.
func (m *Mosquitto) Kill() {
	m.tb.Helper()
	m.signalAndWait(syscall.SIGKILL)
}

// Stop ends the broker with SIGTERM and waits: Mosquitto saves its database
// on the way out.
func (m *Mosquitto) Stop() {
	m.tb.Helper()
	m.signalAndWait(syscall.SIGTERM)
}

// CPU is the processor time the running broker has used so far, user and
// system, in steps of 10 ms (Linux); 0 when it cannot be read.
func (m *Mosquitto) CPU() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.runningLocked() {
		return 0
	}
	return procCPU(m.cmd.Process.Pid)
}

// Reads is the read system calls the broker has made so far (Linux), 0
// when it is not running or they cannot be read. A broker that reads
// nothing for a while has taken every packet its clients sent it.
func (m *Mosquitto) Reads() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.runningLocked() {
		return 0
	}
	return procReads(m.cmd.Process.Pid)
}

// Pause freezes the broker with SIGSTOP: connections stay open but nothing
// is answered, the silent stall that keepalive must detect.
func (m *Mosquitto) Pause() { m.tb.Helper(); m.signal(syscall.SIGSTOP) }

// Resume continues a paused broker with SIGCONT.
func (m *Mosquitto) Resume() { m.tb.Helper(); m.signal(syscall.SIGCONT) }

// Restart starts the broker again on the same port and persistence file.
// A running broker is stopped with SIGTERM first; call Kill before for a
// crash.
func (m *Mosquitto) Restart() {
	m.tb.Helper()
	if m.Running() {
		m.Stop()
	}
	if f, err := os.OpenFile(m.LogPath(), os.O_APPEND|os.O_WRONLY, 0); err == nil {
		_, _ = f.WriteString("--- testbroker: restart ---\n")
		_ = f.Close()
	}
	m.start()
}

func (m *Mosquitto) start() {
	m.tb.Helper()
	if err := m.tryStart(); err != nil {
		m.tb.Fatalf("testbroker: start mosquitto on port %d: %v\n%s", m.port, err, m.Log())
	}
}

func (m *Mosquitto) tryStart() error {
	conf := filepath.Join(m.dir, "mosquitto.conf")
	if err := os.WriteFile(conf, []byte(m.config()), 0o600); err != nil {
		return err
	}
	cmd := exec.Command(m.bin, "-c", conf)
	cmd.Stdout, cmd.Stderr = m.log, m.log
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	m.mu.Lock()
	m.cmd, m.exited = cmd, exited
	m.mu.Unlock()
	return m.waitListening(exited)
}

func (m *Mosquitto) waitListening(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("mosquitto exited at start")
		default:
		}
		c, err := net.DialTimeout("tcp", m.Addr(), 200*time.Millisecond)
		if err == nil {
			_ = c.Close()
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	m.signalAndWait(syscall.SIGKILL)
	return fmt.Errorf("mosquitto not listening after %v", startTimeout)
}

func (m *Mosquitto) config() string {
	o := m.opts
	autosave := max(1, int(o.AutosaveInterval.Round(time.Second)/time.Second))
	inflight := o.MaxInflight
	if inflight == 0 {
		inflight = 100
	}
	lines := []string{
		fmt.Sprintf("listener %d 127.0.0.1", m.port),
		"allow_anonymous true",
		"max_queued_messages 0",
		fmt.Sprintf("max_inflight_messages %d", inflight),
		// Mosquitto flushes its log file after every line, stdout only
		// when its buffer fills.
		"log_dest file " + m.LogPath(),
		"log_timestamp_format %H:%M:%S",
	}
	if !o.NoPersistence {
		lines = append(lines,
			"persistence true",
			"persistence_location "+m.dir+string(filepath.Separator),
			"persistence_file "+dbFile,
			fmt.Sprintf("autosave_interval %d", autosave))
	}
	if o.Verbose {
		lines = append(lines, "log_type all")
	} else {
		lines = append(lines, "log_type error", "log_type warning", "log_type notice", "log_type information")
	}
	if os.Geteuid() == 0 {
		// Mosquitto drops to user "mosquitto" when started as root, which
		// then cannot write the test's directory.
		lines = append(lines, "user root")
	}
	lines = append(lines, o.Extra...)
	return strings.Join(lines, "\n") + "\n"
}

func (m *Mosquitto) signal(sig syscall.Signal) {
	m.tb.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.runningLocked() {
		m.tb.Fatalf("testbroker: signal %v: mosquitto is not running", sig)
	}
	if err := m.cmd.Process.Signal(sig); err != nil {
		m.tb.Fatalf("testbroker: signal %v: %v", sig, err)
	}
}

// signalAndWait sends sig (SIGCONT too, so a paused broker can act on it)
// and waits for the exit, killing after stopTimeout.
func (m *Mosquitto) signalAndWait(sig syscall.Signal) {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	_ = cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-exited:
	case <-time.After(stopTimeout):
		_ = cmd.Process.Kill()
		<-exited
	}
}

func (m *Mosquitto) cleanup() {
	m.signalAndWait(syscall.SIGKILL)
	if m.tb.Failed() {
		m.tb.Logf("testbroker: mosquitto on port %d logged:\n%s", m.port, tail(m.Log(), 64<<10))
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// SyncBuffer is a bytes.Buffer safe for concurrent writers (a process's
// output copiers, a logger) and the test goroutine reading it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) WriteString(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(s)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Len is the number of bytes written so far.
func (b *SyncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}
