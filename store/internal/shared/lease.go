package shared

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// NewHolder names this process as a lease holder: "place pid nonce", the
// place naming where the pid is one (see place), the nonce telling apart
// two handles of one process.
func NewHolder() string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return place() + " " + strconv.Itoa(os.Getpid()) + " " + hex.EncodeToString(nonce[:])
}

// DeadHere reports whether holder names a process on this host that no
// longer exists: a member killed and restarted on the same machine, whose
// lease may be taken over at once.
func DeadHere(holder string) bool {
	f := strings.Fields(holder)
	here := place()
	// A place without its pid namespace cannot tell: the pid may be
	// another namespace's, where it still runs.
	if len(f) != 3 || f[0] != here || !strings.Contains(here, "/") {
		return false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || exited(pid)
}

// exited reports whether pid is a process that has exited and that its
// parent has not yet waited for (a zombie): signals still find one, for as
// long as the parent takes (a container's first process may take seconds,
// or never wait). A thread group whose first thread exited while others
// run shows that thread a zombie too: it has more than one task.
func exited(pid int) bool {
	// A /proc of another pid namespace (unshare --pid without a /proc of
	// its own) shows another process at pid: only signals tell then.
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		return false
	}
	dir := "/proc/" + strconv.Itoa(pid)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')') // after the command's name, which may hold anything
	if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X') {
		return false
	}
	tasks, err := os.ReadDir(dir + "/task")
	return err == nil && len(tasks) <= 1
}

// place is where this process's pid is a pid: the hostname and, where
// /proc tells them, the boot and the pid namespace ("host/boot/pid:[n]").
// The hostname alone does not say it: containers with host networking or a
// fixed hostname share one name, each numbering its processes apart, and
// two machines may share a name too; a pid of one, absent from another,
// is no dead process there.
func place() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return hostname()
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return hostname()
	}
	return hostname() + "/" + strings.TrimSpace(string(boot)) + "/" + strings.ReplaceAll(ns, " ", "_")
}

// hostname is this host's name as a holder carries it: without spaces.
func hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return strings.ReplaceAll(host, " ", "_")
}
