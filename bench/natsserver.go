package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/replayguard/replayguard/internal/testbroker"
)

// natsServer is a nats-server process (the binary on PATH) with
// JetStream, listening on a free loopback port, storing in a directory
// removed at the harness's cleanup.
type natsServer struct {
	port int
	cmd  *exec.Cmd
	done chan struct{}
	log  bytes.Buffer
}

func startNATS(h *harness) *natsServer {
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if bin = "/usr/sbin/nats-server"; !executable(bin) {
			h.Fatal("nats-server is not on PATH nor in /usr/sbin (Debian: apt-get install nats-server)")
		}
	}
	s := &natsServer{port: testbroker.FreePort(h), done: make(chan struct{})}
	dir := h.TempDir()
	s.cmd = exec.Command(bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", filepath.Join(dir, "js"),
		"-l", filepath.Join(dir, "nats.log"))
	s.cmd.Stdout, s.cmd.Stderr = &s.log, &s.log
	if err := s.cmd.Start(); err != nil {
		h.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	h.Cleanup(s.stop)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		select {
		case <-s.done:
			h.Fatalf("nats-server exited at start: %s", s.log.String())
		default:
		}
		if c, err := net.DialTimeout("tcp", s.addr(), 200*time.Millisecond); err == nil {
			c.Close()
			return s
		}
		if time.Now().After(deadline) {
			h.Fatalf("nats-server not listening on %s after 10 s", s.addr())
		}
	}
}

func (s *natsServer) addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL is the server's client URL.
func (s *natsServer) URL() string { return "nats://" + s.addr() }

func (s *natsServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func executable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0
}

// natsVersion is `nats-server --version`, or why not.
func natsVersion() string {
	if _, err := exec.LookPath("nats-server"); err != nil && executable("/usr/sbin/nats-server") {
		return commandLine("/usr/sbin/nats-server", "--version")
	}
	return commandLine("nats-server", "--version")
}

func commandLine(name string, args ...string) string {
	out, _ := exec.Command(name, args...).CombinedOutput()
	if line, _, _ := bytes.Cut(out, []byte("\n")); len(line) > 0 {
		return string(bytes.TrimSpace(line))
	}
	return fmt.Sprintf("%s: not found", name)
}

// cpuTime is the user and system time the server process has used, from
// /proc (clock ticks of 10 ms).
func (s *natsServer) cpuTime(h *harness) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		h.Fatal(err)
	}
	// the fields after the command name, which is in parentheses: state is
	// the first, utime and stime the 12th and 13th
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		h.Fatalf("/proc/%d/stat: %q", s.cmd.Process.Pid, b)
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
