package testbroker

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"testing"
)

// child is a server process started by a helper, together with the
// processes it forks: PostgreSQL's backends (each in a session of its own,
// so out of reach of a signal to the postmaster's process group), Redis's
// rewrite child. SIGKILL, SIGSTOP and SIGCONT reach them all, and a kill
// waits until every one is gone; other signals go to the server, which tells
// the rest. Its methods are safe for the test goroutine and cleanup alike.
type child struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
}

func startChild(cmd *exec.Cmd) (*child, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &child{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) pid() int { return c.cmd.Process.Pid }

func (c *child) running() bool {
	if c == nil {
		return false
	}
	select {
	case <-c.exited:
		return false
	default:
		return true
	}
}

// send delivers sig and returns the forked processes it was sent to.
func (c *child) send(sig syscall.Signal) ([]int, error) {
	leader := c.pid()
	switch sig {
	case syscall.SIGKILL, syscall.SIGSTOP:
		// Stopped, the server forks no process after the list is read.
		if err := syscall.Kill(leader, syscall.SIGSTOP); err != nil {
			return nil, err
		}
		waitStopped(leader)
		kids := childrenOf(leader)
		for _, k := range kids {
			_ = syscall.Kill(-k, sig) // the group it may lead
			_ = syscall.Kill(k, sig)
		}
		return kids, syscall.Kill(leader, sig)
	case syscall.SIGCONT:
		kids := childrenOf(leader)
		for _, k := range kids {
			_ = syscall.Kill(-k, sig)
			_ = syscall.Kill(k, sig)
		}
		return kids, syscall.Kill(leader, sig)
	}
	return nil, syscall.Kill(leader, sig)
}

func (c *child) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	if !c.running() {
		tb.Fatalf("testbroker: signal %v: the server is not running", sig)
	}
	if _, err := c.send(sig); err != nil {
		tb.Fatalf("testbroker: signal %v: %v", sig, err)
	}
}

// signalAndWait sends sig (SIGCONT too, so a paused server can act on it)
// and waits for the exit, killing after stopTimeout. After a SIGKILL it also
// waits for the forked processes: a PostgreSQL backend still dying holds
// shared memory that a restarted server refuses to start beside.
func (c *child) signalAndWait(sig syscall.Signal) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.running() {
		return
	}
	kids, _ := c.send(sig)
	if sig != syscall.SIGKILL {
		_, _ = c.send(syscall.SIGCONT)
	}
	select {
	case <-c.exited:
	case <-time.After(stopTimeout):
		kids, _ = c.send(syscall.SIGKILL)
		<-c.exited
	}
	deadline := time.Now().Add(stopTimeout)
	for _, k := range kids {
		for alive(k) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
	}
}

// procStat returns the state and parent of pid from /proc, ok false when
// there is no such process.
func procStat(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid …; comm may hold spaces and parentheses.
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(string(f[1]))
	return f[0][0], ppid, true
}

// procCPU returns the processor time pid has used, user and system, from
// /proc (in clock ticks, USER_HZ, 100 a second on Linux); 0 when it cannot
// be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(string(f[11]), 10, 64)
	stime, _ := strconv.ParseInt(string(f[12]), 10, 64)
	return time.Duration(utime+stime) * (time.Second / 100)
}

// procReads is the read system calls pid has made (syscr in
// /proc/PID/io), 0 when they cannot be read.
func procReads(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return 0
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("syscr: ")); ok {
			n, _ := strconv.ParseInt(string(v), 10, 64)
			return n
		}
	}
	return 0
}

// alive reports whether pid has not exited: a zombie, which nobody may reap
// when its parent was killed, has.
func alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z' && state != 'X'
}

func waitStopped(pid int) {
	deadline := time.Now().Add(stopTimeout)
	for time.Now().Before(deadline) {
		state, _, ok := procStat(pid)
		if !ok || state == 'T' || state == 'Z' || state == 'X' {
			return
		}
		time.Sleep(100 * time.Microsecond)
	}
}

func childrenOf(pid int) []int {
	var kids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		k, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		if _, ppid, ok := procStat(k); ok && ppid == pid {
			kids = append(kids, k)
		}
	}
	return kids
}
