package shared

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// NewHolder names this process as a lease holder: "hostname pid nonce",
// the nonce telling apart two handles of one process.
func NewHolder() string {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	return hostname() + " " + strconv.Itoa(os.Getpid()) + " " + hex.EncodeToString(nonce[:])
}

// DeadHere reports whether holder names a process on this host that no
// longer exists: a member killed and restarted on the same machine, whose
// lease may be taken over at once.
func DeadHere(holder string) bool {
	f := strings.Fields(holder)
	if len(f) != 3 || f[0] != hostname() {
		return false
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return false
	}
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// hostname is this host's name as a holder carries it: without spaces.
func hostname() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return strings.ReplaceAll(host, " ", "_")
}
