package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/testbroker"
	"github.com/replayguard/replayguard/store/postgres"
)

// BenchmarkUpdate runs batches of 500 id-route messages (meter readings,
// each adding to one of 50 meters) through an engine on one member, on a
// durable server (fsync and synchronous_commit on), and reports msg/s.
func BenchmarkUpdate(b *testing.B) {
	for _, size := range []int{500, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) { benchUpdate(b, size) })
	}
}

func benchUpdate(b *testing.B, size int) {
	benchUpdateWith(b, size, benchCase{})
}

// BenchmarkUpdateSQL is BenchmarkUpdate at batch 500 with a sql effect on
// the route, one INSERT a message into a table of the user's with a
// primary key and a unique constraint of its own, against the same route
// without it (sql=none). refused=1% makes 5 messages of each batch
// violate the unique constraint: quarantined, the rest of the batch
// committed, decided again once per refusal (the default) or found in one
// pass with a savepoint per message (savepoints).
func BenchmarkUpdateSQL(b *testing.B) {
	for _, c := range []struct {
		name string
		benchCase
	}{
		{"sql=none", benchCase{}},
		{"sql=insert/refused=0%/adaptive", benchCase{sql: true}},
		{"sql=insert/refused=0%/rerun", benchCase{sql: true, mode: postgres.SQLRerun}},
		{"sql=insert/refused=0%/savepoints", benchCase{sql: true, mode: postgres.SQLSavepoints}},
		{"sql=insert/refused=1%/adaptive", benchCase{sql: true, refuseEvery: 100}},
		{"sql=insert/refused=1%/rerun", benchCase{sql: true, refuseEvery: 100, mode: postgres.SQLRerun}},
		{"sql=insert/refused=1%/savepoints", benchCase{sql: true, refuseEvery: 100, mode: postgres.SQLSavepoints}},
	} {
		b.Run(c.name, func(b *testing.B) { benchUpdateWith(b, 500, c.benchCase) })
	}
}

// benchCase varies BenchmarkUpdate's route.
type benchCase struct {
	sql         bool // one INSERT a message
	refuseEvery int  // one message in refuseEvery violates the table's unique constraint (0: none)
	mode        postgres.SQLMode
}

func benchUpdateWith(b *testing.B, size int, c benchCase) {
	pg := testbroker.StartPostgres(b, testbroker.PostgresOptions{})
	s, err := postgres.Open(b.Context(), postgres.Options{URL: pg.URL(), Member: "bench-1"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	route := engine.Route{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}
	if c.sql {
		benchExec(b, pg.URL(), `CREATE TABLE readings (msg_id text PRIMARY KEY, meter text NOT NULL, kwh numeric NOT NULL, serial text UNIQUE);
			INSERT INTO readings VALUES ('seed', 'meter-0', 0, 'taken')`)
		route.Effects = append(route.Effects, engine.EffectSpec{
			SQL:  "INSERT INTO readings (msg_id, meter, kwh, serial) VALUES ($1, $2, $3, $4)",
			Args: []string{"msgId", "topic[1]", "kwh", "serial"},
		})
	}
	postgres.SetSQLMode(s, c.mode)
	e, err := engine.New(b.Context(), s, engine.Options{Routes: []engine.Route{route}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	n := 0
	batch := func() []engine.Message {
		msgs := make([]engine.Message, size)
		for i := range msgs {
			n++
			serial := ""
			if c.refuseEvery > 0 && i%c.refuseEvery == c.refuseEvery/2 {
				serial = `,"serial":"taken"`
			}
			msgs[i] = engine.Message{Topic: fmt.Sprintf("plant/meter-%d/energy", n%50),
				Payload: fmt.Appendf(nil, `{"msgId":"reading-%09d","kwh":0.25,"site":"north","unit":"kWh"%s}`, n, serial)}
		}
		return msgs
	}
	b.ReportAllocs()
	cpu0, pg0 := processCPU(), serverCPU(b, pg)
	held := 0
	for b.Loop() {
		b.StopTimer()
		msgs := batch()
		b.StartTimer()
		ds, err := e.Process(b.Context(), msgs)
		if err != nil {
			b.Fatal(err)
		}
		if ds[0].Outcome != engine.Applied {
			b.Fatalf("outcome %v", ds[0].Outcome)
		}
		for _, d := range ds {
			if d.Outcome != engine.Applied {
				held++
			}
		}
	}
	if c.refuseEvery > 0 && held != b.N*size/c.refuseEvery {
		b.Fatalf("%d messages held in %d batches, want %d", held, b.N, b.N*size/c.refuseEvery)
	}
	b.ReportMetric(float64(b.N*size)/b.Elapsed().Seconds(), "msg/s")
	// CPU time per batch, this process's and the server's: what bounds the
	// rate on an idle machine, whatever else runs on it now.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N)/1e6, "client-cpu-ms/op")
	b.ReportMetric(float64(serverCPU(b, pg)-pg0)/float64(b.N)/1e6, "server-cpu-ms/op")
	st := s.SharedStats()
	b.ReportMetric(st.UpdateSeconds/float64(st.Updates)*1000, "ms/update")
	if st.Retries != 0 || st.Failures != 0 {
		b.Fatalf("stats %+v", st)
	}
}

// benchExec runs sql on the server at url.
func benchExec(b *testing.B, url, sql string) {
	c, err := pgx.Connect(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(b.Context(), sql); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// serverCPU is the CPU time the server's postmaster and its children have
// used, from /proc.
func serverCPU(b *testing.B, pg *testbroker.Postgres) time.Duration {
	pidFile, err := os.ReadFile(filepath.Join(pg.DataDir(), "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	master := strings.SplitN(string(pidFile), "\n", 2)[0]
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	var ticks int64
	for _, f := range dirs {
		st, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		// pid (comm) state ppid … utime stime: fields 14 and 15.
		fields := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
		pid := strings.TrimSuffix(strings.TrimPrefix(filepath.Dir(f), "/proc/"), "/")
		if len(fields) < 13 || (pid != master && fields[1] != master) {
			continue
		}
		u, _ := strconv.ParseInt(fields[11], 10, 64)
		s, _ := strconv.ParseInt(fields[12], 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}
