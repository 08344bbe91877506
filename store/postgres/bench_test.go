package postgres_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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
	pg := testbroker.StartPostgres(b, testbroker.PostgresOptions{})
	s, err := postgres.Open(b.Context(), postgres.Options{URL: pg.URL(), Member: "bench-1"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	e, err := engine.New(b.Context(), s, engine.Options{Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}}})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	n := 0
	batch := func() []engine.Message {
		msgs := make([]engine.Message, size)
		for i := range msgs {
			n++
			msgs[i] = engine.Message{Topic: fmt.Sprintf("plant/meter-%d/energy", n%50),
				Payload: fmt.Appendf(nil, `{"msgId":"reading-%09d","kwh":0.25,"site":"north","unit":"kWh"}`, n)}
		}
		return msgs
	}
	b.ReportAllocs()
	cpu0, pg0 := processCPU(), serverCPU(b, pg)
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
