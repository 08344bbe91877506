package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// TestDurability starts servers with the settings that can lose an
// acknowledged commit.
func TestDurability(t *testing.T) {
	for _, setting := range []string{"synchronous_commit", "fsync"} {
		t.Run(setting+" off is refused unless allowed", func(t *testing.T) {
			pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{setting + "=off"}})
			g := newGroup(t, pg.URL())
			_, err := g.open("m1")
			want := setting + ` is "off": a commit could be lost after the broker was acknowledged (set ` + setting +
				` = on, or store.allow_not_durable: true to accept that)`
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Open = %v, want %q", err, want)
			}
			o := g.options("m1")
			o.AllowNotDurable = true
			s, err := g.openWith(o)
			if err != nil {
				t.Fatal(err)
			}
			if st := s.SharedStats(); st.Durable || st.NotDurable != setting+"=off" {
				t.Fatalf("stats %+v, want not durable by %s=off", st, setting)
			}
			// A read-only handle commits nothing: it reads the group.
			ro, err := g.open("")
			if err != nil {
				t.Fatalf("read-only open: %v", err)
			}
			defer ro.Close()
			if st := ro.SharedStats(); st.Durable || st.NotDurable != setting+"=off" {
				t.Fatalf("read-only stats %+v, want not durable by %s=off", st, setting)
			}
		})
	}
}

func TestUnreachable(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	pg.Stop()
	url := "postgres://rg:s3cret@" + pg.Addr() + "/postgres?sslmode=disable&connect_timeout=2"
	_, err := postgres.Open(t.Context(), postgres.Options{URL: url, Member: "m1"})
	if err == nil || !strings.Contains(err.Error(), "postgres://rg@"+pg.Addr()+"/postgres") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open on a stopped server = %v, want an error naming the server without its password", err)
	}
}

// A server that accepts connections and never answers (stopped, here)
// fails Open within the default connect timeout, naming it, when the URL
// sets none: it held every command, and run's start, for ever.
func TestAServerThatNeverAnswersFailsOpen(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	pg.Pause()
	t.Cleanup(pg.Resume)
	ctx, cancel := context.WithTimeout(t.Context(), 6*postgres.DefaultConnectTimeout)
	defer cancel()
	_, err := postgres.Open(ctx, postgres.Options{URL: pg.URL(), Member: "m1"})
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "connect to postgres://") {
		t.Fatalf("Open on a server that never answers = %v (the test's own bound: %v), want it to give up naming the server", err, ctx.Err())
	}
}

// TestRestart kills the server under an open handle: Update fails while
// it is down, and the same handle works once it is back.
func TestRestart(t *testing.T) {
	pg := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
	g := newGroup(t, pg.URL())
	s := g.mustOpen("m1")
	write := func(pos uint64) error {
		return s.Update(t.Context(), &engine.Reads{Keys: []engine.Hash{key(int(pos))}}, func(*engine.Rows) (*engine.Batch, error) {
			return &engine.Batch{Keys: []engine.KeyEntry{keyEntry(int(pos), time.Now())}, Audit: records("m1", pos, 1)}, nil
		})
	}
	if err := write(1); err != nil {
		t.Fatal(err)
	}
	pg.Kill()
	err := write(2)
	if err == nil || !strings.HasPrefix(err.Error(), "postgres store: ") || errors.Is(err, engine.ErrContention) {
		t.Fatalf("Update with the server down = %v", err)
	}
	if st := s.SharedStats(); st.LastError == "" || st.Failures != 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("with the server down: %v", err)
	pg.Restart()
	if err := write(2); err != nil {
		t.Fatalf("Update after the restart: %v", err)
	}
	h, err := s.Head(t.Context())
	if err != nil || h.Position != 2 {
		t.Fatalf("head %+v, %v", h, err)
	}
	if st := s.SharedStats(); st.LastError != "" || st.Updates != 2 {
		t.Fatalf("stats %+v", st)
	}
}
