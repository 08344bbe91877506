package shared

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDeadHereLiveHolderUnderAForeignProc: a process whose /proc is not
// its own pid namespace's (unshare --pid --fork without a /proc of its
// own) reads in /proc/PID another process than its PID names. A live
// member there, whose pid is, in the /proc mounted, a zombie's, must not
// be taken for dead: its lease would go to a second process.
func TestDeadHereLiveHolderUnderAForeignProc(t *testing.T) {
	if z := os.Getenv("REPLAYGUARD_TEST_ZOMBIE_PID"); z != "" {
		zombieHelper(z)
		return
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare")
	}
	// A zombie in this namespace: killed, not waited for.
	zc := exec.Command("sleep", "60")
	if err := zc.Start(); err != nil {
		t.Skip(err)
	}
	defer zc.Wait()
	if err := zc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	zpid := zc.Process.Pid
	for deadline := time.Now().Add(10 * time.Second); !exited(zpid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Skip("the killed process did not become a zombie")
		}
	}
	cmd := exec.Command(unshare, "--pid", "--fork", os.Args[0], "-test.run=^TestDeadHereLiveHolderUnderAForeignProc$", "-test.count=1")
	cmd.Env = append(os.Environ(), "REPLAYGUARD_TEST_ZOMBIE_PID="+strconv.Itoa(zpid))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Skipf("cannot make a pid namespace: %v: %s", err, out)
	}
	switch s := string(out); {
	case strings.HasPrefix(s, "dead"):
		t.Fatalf("a live process (pid %d in its namespace, where /proc/%d is this namespace's zombie) was taken for dead: %s", zpid, zpid, s)
	case strings.HasPrefix(s, "alive"):
	default:
		t.Skipf("could not place a live process at pid %d: %s", zpid, s)
	}
}

// zombieHelper runs in the new pid namespace: it starts a process at
// pid z there and asks DeadHere about it while it runs.
func zombieHelper(z string) {
	pid, _ := strconv.Atoi(z)
	for range 20 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			fmt.Println("skip:", err)
			return
		}
		c := exec.Command("sleep", "60")
		if err := c.Start(); err != nil {
			fmt.Println("skip:", err)
			return
		}
		got := c.Process.Pid
		if got == pid {
			holder := place() + " " + z + " 00"
			if DeadHere(holder) {
				fmt.Println("dead")
			} else {
				fmt.Println("alive")
			}
			_ = c.Process.Kill()
			_ = c.Wait()
			return
		}
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	fmt.Println("skip: never got pid", z)
}
