package shared

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
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
