package shared

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestDeadHere(t *testing.T) {
	me := NewHolder()
	if f := strings.Fields(me); len(f) != 3 || f[1] != strconv.Itoa(os.Getpid()) {
		t.Fatalf("holder %q is not host, pid, nonce", me)
	}
	if NewHolder() == me {
		t.Fatal("two holders of one process are the same")
	}
	if DeadHere(me) {
		t.Fatal("this live process was taken for dead")
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip(err)
	}
	dead := place() + " " + strconv.Itoa(cmd.Process.Pid) + " 00"
	if !DeadHere(dead) {
		t.Fatalf("an exited process on this host (%s) was not taken for dead", dead)
	}
	for _, h := range []string{"elsewhere " + strconv.Itoa(cmd.Process.Pid) + " 00", place() + " x 00", "", place() + " 1", hostname() + " " + strconv.Itoa(cmd.Process.Pid) + " 00"} {
		if DeadHere(h) {
			t.Errorf("DeadHere(%q) = true", h)
		}
	}
}

// A member killed and not yet waited for by its parent (a zombie, as a
// container's first process leaves one for a while) is dead: its
// lease may be taken over at once.
func TestDeadHereTakesAZombieForDead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	holder := place() + " " + strconv.Itoa(pid) + " 00"
	if DeadHere(holder) {
		t.Fatal("a running process was taken for dead")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	// SIGKILL takes effect at once, but not within the call: wait for it,
	// bounded.
	for deadline := time.Now().Add(10 * time.Second); !DeadHere(holder); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			t.Fatalf("a killed process not yet waited for (%s) was not taken for dead: %s", holder, stat)
		}
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the killed process was gone, not a zombie: %v", err)
	}
}
