package testbroker

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// A broker a test kills and starts again comes back on its port, which is
// free while it is down. Taken from the kernel's ephemeral range, the port
// could meanwhile go to a server another package's test starts on a port
// of that range, or to the local end of any connection; the broker then
// fails to start ("Address already in use") and the other test's clients
// reach a broker of the wrong kind. So FreePort takes ports below that
// range, where the kernel hands none out, and reserves each one for the
// test's life in a file that the user's test processes running at once
// all see.

// portsLow is the lowest port FreePort takes: above the well-known ports
// of the services a machine may run (PostgreSQL, Redis, NATS, MQTT).
const portsLow = 10000

// FreePort returns a TCP port on 127.0.0.1, free a moment ago and below
// the kernel's ephemeral ports, that no other test holds: it is reserved
// until tb's end.
func FreePort(tb testing.TB) int {
	tb.Helper()
	high := ephemeralLow()
	for range 1000 {
		port := portsLow + rand.IntN(high-portsLow)
		if !reservePort(tb, port) {
			continue
		}
		// A port some other program listens on stays reserved, unused,
		// until tb's end: released now, another test could reserve it
		// and lose the reservation to tb's cleanup.
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			_ = l.Close()
			return port
		}
	}
	tb.Fatalf("testbroker: no free port between %d and %d after 1000 tries", portsLow, high)
	return 0
}

// ephemeralLow is the lowest port of the kernel's ephemeral range
// (32768 by default, and when it cannot be read).
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > portsLow+1000 {
				return n
			}
		}
	}
	return 32768
}

// portsDir holds a file for each port the user's tests reserved, naming
// the process.
func portsDir() string {
	return filepath.Join(os.TempDir(), "replayguard-test-ports-"+strconv.Itoa(os.Getuid()))
}

// reservePort reserves port for tb's life, unless a live process holds it
// (the file of one that died is taken over).
func reservePort(tb testing.TB, port int) bool {
	if err := os.MkdirAll(portsDir(), 0o777); err != nil {
		tb.Fatalf("testbroker: reserve a port: %v", err)
	}
	path := filepath.Join(portsDir(), strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err == nil {
			_, err = fmt.Fprint(f, os.Getpid())
			if err = errors.Join(err, f.Close()); err != nil {
				tb.Fatalf("testbroker: reserve port %d: %v", port, err)
			}
			tb.Cleanup(func() { releasePort(port) })
			return true
		}
		if !errors.Is(err, fs.ErrExist) || holderAlive(path) {
			return false
		}
		_ = os.Remove(path)
	}
	return false
}

// holderAlive says whether the process a port's file names is running
// (or the file cannot be read yet: its holder is writing it).
func holderAlive(path string) bool {
	b, err := os.ReadFile(path)
	pid, perr := strconv.Atoi(string(b))
	if err != nil || perr != nil {
		return true
	}
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func releasePort(port int) { _ = os.Remove(filepath.Join(portsDir(), strconv.Itoa(port))) }
