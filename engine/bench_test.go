package engine

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// benchEngine is an engine without a store: decide and decode only.
func benchEngine(b testing.TB, routes []Route, maxKeys int) *Engine {
	b.Helper()
	e := &Engine{maxPayload: DefaultMaxPayload}
	e.opts = Options{SequenceSpan: DefaultSequenceSpan, KeepEpochs: DefaultKeepEpochs, MaxEntries: maxKeys}
	for _, r := range routes {
		c, err := compileRoute(r, map[string]RouteKind{KindJSON: jsonKind{}}, false)
		if err != nil {
			b.Fatal(err)
		}
		e.routes = append(e.routes, c)
	}
	e.keys = newKeyWindow(maxKeys, 0)
	e.sources = map[string]*SourceState{}
	e.entities = map[string]*entity{}
	e.resetPending()
	return e
}

var benchIncidents = Route{Name: "incidents", Topic: "incidents/#", Source: []string{"agency", "source_id"},
	Sequence: "sequence", Epoch: "boot_id",
	Effects: []EffectSpec{{Entity: "incident/{incident_id}", Add: map[string]string{"casualties": "casualty_delta"}},
		{Entity: "unit/{unit_id}", Set: map[string]string{"status": "unit_status"}}}}

// incidentPayload is a ~200-byte incident update.
func incidentPayload(src, seq int) []byte {
	return []byte(fmt.Sprintf(`{"agency":"county-fire","source_id":"mdt-%03d","boot_id":1,"sequence":%d,`+
		`"incident_id":"INC-2026-%04d","unit_id":"E%d","unit_status":"enroute","casualty_delta":0,`+
		`"lat":38.8977,"lon":-77.0365,"note":"structure fire, 2nd alarm"}`, src, seq, seq%97, src))
}

// fill puts n applied keys into the window.
func fill(e *Engine, n int) {
	now := time.Now().UnixNano()
	for i := 0; i < n; i++ {
		e.keys.insert(testKey(uint64(i)+1<<40), testKey(uint64(i)), now)
	}
}

// BenchmarkDecide measures the decision alone on pre-decoded messages, with
// a million keys in the window: each decision looks a new key up, inserts
// it and evicts the oldest. A ring of pre-decoded messages is reused with a
// fresh key (and, for sequenced routes, the next sequence) each time round.
func BenchmarkDecide(b *testing.B) {
	for _, tc := range []struct {
		name   string
		routes []Route
	}{
		{"id-route", []Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId"}}},
		{"sequenced-route", []Route{benchIncidents}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			e := benchEngine(b, tc.routes, 1_000_000)
			fill(e, 1_000_000)
			const n = 50 * 82 // 82 messages for each of 50 sources
			ds := make([]*Delivery, n)
			for i := range ds {
				var m Message
				if tc.routes[0].ID != "" {
					m = Message{Topic: fmt.Sprintf("plant/m%d/energy", i%50), Payload: []byte(fmt.Sprintf(`{"msgId":"m-%d"}`, i))}
				} else {
					m = Message{Topic: "incidents/fire", Payload: incidentPayload(i%50, i/50+1)}
				}
				d, err := e.decode(&m)
				if err != nil {
					b.Fatal(err)
				}
				ds[i] = d
			}
			now := time.Now()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				d := ds[i%n]
				binary.LittleEndian.PutUint64(d.key[:8], mix(uint64(i))) // a new, uniformly spread key
				if d.seq >= 0 && i >= n {
					d.seq += n / 50 // the source's next sequences
				}
				if dec := e.decide(d, now, false, false, 0); !dec.Outcome.Effective() {
					b.Fatalf("decision %d: %s", i, dec.Outcome)
				}
				if len(e.pending.batch.Keys) >= 1000 {
					e.resetPending()
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// BenchmarkDecodeDecide measures extraction, validation, key and digest
// derivation and the decision for 200-byte incident messages.
func BenchmarkDecodeDecide(b *testing.B) {
	e := benchEngine(b, []Route{benchIncidents}, 1_000_000)
	const n = 1 << 14
	msgs := make([]Message, n)
	for i := range msgs {
		msgs[i] = Message{Topic: "incidents/fire", Payload: incidentPayload(i%50, i/50+1)}
	}
	now := time.Now()
	b.SetBytes(int64(len(msgs[0].Payload)))
	b.ReportAllocs()
	b.ResetTimer()
	cpu := processCPU()
	for i := 0; i < b.N; i++ {
		m := &msgs[i%n]
		d, err := e.decode(m)
		if err != nil {
			b.Fatal(err)
		}
		e.decide(d, now, false, false, 0)
		if len(e.pending.batch.Keys) >= 1000 {
			e.resetPending()
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	b.ReportMetric(float64(processCPU()-cpu)/float64(b.N), "cpu-ns/op")
}

// processCPU is the CPU time the process used so far (user and system, the
// garbage collector's included), in nanoseconds. On a shared machine it is
// a steadier measure than elapsed time, which grows with other load.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkWindowMemory reports the heap the key window takes per entry at
// a million entries, and a sequenced source's window.
func BenchmarkWindowMemory(b *testing.B) {
	for i := 0; i < b.N; i++ {
		before := heapInUse()
		w := newKeyWindow(1_000_000, 0)
		now := time.Now().UnixNano()
		for k := uint64(0); k < 1_000_000; k++ {
			w.insert(testKey(k), testKey(k), now)
		}
		after := heapInUse()
		b.ReportMetric(float64(after-before)/1e6, "B/key")

		e := benchEngine(b, []Route{benchIncidents}, 10)
		before = heapInUse()
		srcs := make([]*SourceState, 1000)
		for s := range srcs {
			m := Message{Topic: "incidents/fire", Payload: incidentPayload(s, 1)}
			d, _ := e.decode(&m)
			srcs[s] = &SourceState{Route: "incidents", Source: cloneStrings(d.source)}
			srcs[s].checkSequence(d, DefaultSequenceSpan, DefaultKeepEpochs, false)
		}
		after = heapInUse()
		b.ReportMetric(float64(after-before)/1000, "B/source")
		runtime.KeepAlive(w)
		runtime.KeepAlive(srcs)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// mix is splitmix64's finaliser: a counter spread like a hash output.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
