package embedded_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/embedded"
)

// killChildEnv names the store directory of the child process of
// TestOutboxSurvivesKill.
const killChildEnv = "REPLAYGUARD_OUTBOX_KILL_CHILD"

var killRoutes = []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
	Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{topic}"}}}}}

// killPayload is message i's payload: bytes a re-encoding would change.
func killPayload(i int) []byte {
	return fmt.Appendf(nil, `{"msgId":"r-%d", "kwh":0.250, "note":"\u00e9\u0000 %s"}`, i, strings.Repeat("x", i%700))
}

// TestOutboxSurvivesKill kills a process with kill -9 while it decides
// messages whose forwards go to the outbox and marks some delivered: every
// message it reported committed has its entry, bytes exact, and every
// entry it reported done is gone.
func TestOutboxSurvivesKill(t *testing.T) {
	if dir := os.Getenv(killChildEnv); dir != "" {
		killChild(dir)
		return
	}
	dir := t.TempDir()
	for round := range 3 {
		cmd, sc, stderr := startKillChild(t, "TestOutboxSurvivesKill", killChildEnv, dir)
		// Entries reported done (true), or to be marked done, which the
		// child may have done after the last line read (false).
		committed, doneIDs := map[uint64]int{}, map[uint64]bool{}
		for sc.Scan() && len(committed) < 300*(round+1) {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				continue
			}
			a, _ := strconv.ParseUint(f[1], 10, 64)
			b, _ := strconv.Atoi(f[2])
			switch f[0] {
			case "committed": // position, message, whether its entry is to be marked done
				committed[engine.OutboxID(a, 0)] = b
				if f[3] == "1" && !doneIDs[engine.OutboxID(a, 0)] {
					doneIDs[engine.OutboxID(a, 0)] = false
				}
			case "done": // an entry id
				doneIDs[a] = true
			}
		}
		killAndWait(t, cmd)
		if len(committed) == 0 {
			t.Fatalf("round %d: the child committed nothing: %s", round, stderr.String())
		}
		checkAfterKill(t, dir, committed, doneIDs)
	}
}

// startKillChild starts this test binary running test alone with env set
// to dir, the child process a kill test kills: it returns the child, a
// scanner of its output and what it writes on stderr.
func startKillChild(t *testing.T, test, env, dir string) (*exec.Cmd, *bufio.Scanner, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$")
	cmd.Env = append(os.Environ(), env+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, bufio.NewScanner(out), &stderr
}

// openKillChild opens the store in dir for a kill test's child.
func openKillChild(dir string) *embedded.Store {
	s, err := embedded.Open(dir, embedded.Options{})
	if err != nil {
		killChildFailed(err)
	}
	return s
}

// killChildFailed ends a kill test's child on err, which the test prints.
func killChildFailed(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// killAndWait kills the child with kill -9 and waits for it to end.
func killAndWait(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func checkAfterKill(t *testing.T, dir string, committed map[uint64]int, doneIDs map[uint64]bool) {
	t.Helper()
	s := open(t, dir, embedded.Options{ReadOnly: true})
	es, err := s.Outbox(t.Context(), "", 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	pending := map[uint64]engine.OutboxEntry{}
	for _, e := range es {
		pending[e.ID] = e
	}
	for id, i := range committed {
		e, ok := pending[id]
		reported, marking := doneIDs[id]
		switch {
		case reported && ok:
			t.Fatalf("entry %d was reported done and is pending after kill -9", id)
		case marking && !ok:
		case !ok:
			t.Fatalf("entry %d of a committed message is missing after kill -9", id)
		case !bytes.Equal(e.Payload, killPayload(i)) || e.Target != fmt.Sprintf("clean/plant/m-%d/energy", i%5):
			t.Fatalf("entry %d after kill -9: target %q, payload %q", id, e.Target, e.Payload)
		}
	}
	if n, err := s.OutboxDepth(t.Context(), ""); err != nil || n != len(es) {
		t.Fatalf("OutboxDepth after kill -9 = %d, %v; %d entries listed", n, err, len(es))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// killChild decides messages four at a time until killed, printing each
// committed message, and marks the first entry of each batch done.
func killChild(dir string) {
	s := openKillChild(dir)
	ctx := context.Background()
	snap, err := s.Load(ctx)
	if err != nil {
		killChildFailed(err)
	}
	e, err := engine.New(ctx, s, engine.Options{Routes: killRoutes, TTL: time.Hour})
	if err != nil {
		killChildFailed(err)
	}
	for n := int(snap.AuditHead.Position); ; n += 4 { // a message per position: each round's are new
		msgs := make([]engine.Message, 4)
		for j := range msgs {
			msgs[j] = engine.Message{Topic: fmt.Sprintf("plant/m-%d/energy", (n+j)%5), Payload: killPayload(n + j)}
		}
		ds, err := e.Process(ctx, msgs)
		if err != nil {
			killChildFailed(err)
		}
		for j, d := range ds {
			if d.Outcome != engine.Applied {
				killChildFailed(fmt.Errorf("message %d: %v", n+j, d.Outcome))
			}
			first := 0
			if j == 0 {
				first = 1
			}
			fmt.Printf("committed %d %d %d\n", d.Position, n+j, first)
		}
		id := engine.OutboxID(ds[0].Position, 0)
		if err := s.OutboxDone(ctx, "", []uint64{id}); err != nil {
			killChildFailed(err)
		}
		fmt.Printf("done %d 0 0\n", id)
	}
}
