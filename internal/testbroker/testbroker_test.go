package testbroker_test

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/replayguard/replayguard/internal/testbroker"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		testbroker.CleanupPostgres()
		os.Exit(code)
	}))
}

func TestMosquitto(t *testing.T) {
	t.Run("a session's queued messages survive a crash after an autosave", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		id := testbroker.UniqueClientID("rg-test")
		sub := testbroker.StartAutoAckConsumer(t, m.URL(), id, "replayguard/test/#")
		sub.Close()

		pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 10})
		if got := pub.Publish(context.Background(), "a", 20); got != 20 {
			t.Fatalf("acked %d of 20", got)
		}
		pub.Close()
		m.SnapshotDB() // an autosave after the publishes
		m.Kill()
		if m.Running() {
			t.Fatal("still running after Kill")
		}
		m.Restart()

		sub = testbroker.StartAutoAckConsumer(t, m.URL(), id, "replayguard/test/#")
		testbroker.WaitReceived(t, sub.Received, 20, 10*time.Second)
	})

	t.Run("a standby from a snapshot has the session of the snapshot", func(t *testing.T) {
		primary := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		id := testbroker.UniqueClientID("rg-test")
		testbroker.StartAutoAckConsumer(t, primary.URL(), id, "replayguard/test/#").Close()
		pub := testbroker.NewPublisher(t, []string{primary.URL()}, testbroker.PublisherOptions{})
		pub.Publish(context.Background(), "a", 5)
		snap := primary.SnapshotDB()
		primary.Kill()

		standby := testbroker.StartFromSnapshot(t, snap)
		if standby.Port() == primary.Port() {
			t.Fatal("standby on the primary's port")
		}
		if _, err := os.Stat(standby.DBPath()); err != nil {
			t.Fatal(err)
		}
		sub := testbroker.StartAutoAckConsumer(t, standby.URL(), id, "replayguard/test/#")
		testbroker.WaitReceived(t, sub.Received, 5, 10*time.Second)
		if got := len(pub.Acked()); got != 5 {
			t.Fatalf("publisher recorded %d acks, want 5", got)
		}
	})

	t.Run("a paused broker acknowledges nothing until resumed", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{NoPersistence: true})
		pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{})
		m.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if got := pub.Publish(ctx, "a", 1); got != 0 {
			t.Fatal("a paused broker acknowledged a publish")
		}
		m.Resume()
		if got := pub.Publish(context.Background(), "a", 1); got != 1 {
			t.Fatal("no ack after resume")
		}
		acked := pub.Acked()
		if len(acked) != 1 || acked[0].Sequence != 2 {
			t.Fatalf("acked = %+v, want only sequence 2", acked)
		}
	})
}

func TestRestartFrom(t *testing.T) {
	t.Run("a broker restarted from an older snapshot replays what was acknowledged after it", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
		id := testbroker.UniqueClientID("rg-test")
		testbroker.StartAutoAckConsumer(t, m.URL(), id, "replayguard/test/#").Close()
		pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 10})
		pub.Publish(context.Background(), "a", 10)
		snap := m.SnapshotDB() // the session holds the 10, none acknowledged
		sub := testbroker.StartAutoAckConsumer(t, m.URL(), id, "replayguard/test/#")
		testbroker.WaitReceived(t, sub.Received, 10, 10*time.Second)
		sub.Close()
		m.SnapshotDB() // the broker's own file now holds the acks

		port := m.Port()
		m.RestartFrom(snap)
		if m.Port() != port {
			t.Fatalf("restarted on port %d, want %d", m.Port(), port)
		}
		sub = testbroker.StartAutoAckConsumer(t, m.URL(), id, "replayguard/test/#")
		testbroker.WaitReceived(t, sub.Received, 10, 10*time.Second)
	})
}

func TestCopyDB(t *testing.T) {
	t.Run("a copy is the broker's last complete save, taken without waiting for the next", func(t *testing.T) {
		m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{AutosaveInterval: time.Hour})
		m.Restart() // saves on the way out; the next autosave is an hour away
		saved, err := os.ReadFile(m.DBPath())
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(m.CopyDB())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, saved) {
			t.Errorf("copy of %d bytes, not the %d of the broker's save", len(got), len(saved))
		}
	})
}

func TestMissingServer(t *testing.T) {
	for name, set := range map[string]func(t *testing.T){
		"redis-server": func(t *testing.T) {
			t.Setenv(testbroker.RedisEnv, "/nonexistent/redis-server")
			testbroker.RedisPath(t)
		},
		"PostgreSQL": func(t *testing.T) {
			t.Setenv(testbroker.PostgresBinDirEnv, "/nonexistent")
			testbroker.PostgresBinDir(t)
		},
	} {
		t.Run("a missing "+name+" skips the test", func(t *testing.T) {
			t.Setenv(testbroker.RequireServicesEnv, "")
			var inner *testing.T
			t.Run("inner", func(t *testing.T) { inner = t; set(t) })
			if !inner.Skipped() {
				t.Fatal("not skipped")
			}
		})
	}
}

// TestMosquittoReadsGrowWithThePacketsItTakes: Reads counts the broker's
// read system calls, which the bench reads to know when it has taken
// every acknowledgement; they grow with what clients send, stay put while
// nothing comes, and are 0 once it is stopped.
func TestMosquittoReadsGrowWithThePacketsItTakes(t *testing.T) {
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skip("no /proc/PID/io here")
	}
	m := testbroker.StartMosquitto(t, testbroker.MosquittoOptions{})
	before := m.Reads()
	pub := testbroker.NewPublisher(t, []string{m.URL()}, testbroker.PublisherOptions{Window: 10})
	if got := pub.Publish(context.Background(), "a", 50); got != 50 {
		t.Fatalf("acked %d of 50", got)
	}
	after := m.Reads()
	if after < before+50 {
		t.Fatalf("reads went from %d to %d over 50 publishes, want at least one a publish", before, after)
	}
	pub.Close()
	m.Kill()
	if n := m.Reads(); n != 0 {
		t.Fatalf("a stopped broker's reads are %d, want 0", n)
	}
}
