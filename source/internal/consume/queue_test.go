package consume

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestQueue(t *testing.T) {
	t.Run("deliveries come out in the order they went in, whatever the interleaving", func(t *testing.T) {
		seed := uint64(time.Now().UnixNano())
		t.Logf("seed %d", seed)
		rng := rand.New(rand.NewPCG(seed, 1))
		q := NewQueue[int]()
		var in, out int
		for range 20000 {
			if rng.IntN(3) > 0 { // pushes outrun takes: the queue grows
				in++
				if ok := q.Push(in); !ok {
					t.Fatalf("push %d refused", in)
				}
				continue
			}
			for _, d := range q.Take(nil, 1+rng.IntN(40)) {
				out++
				if d != out {
					t.Fatalf("took %d, want %d (seed %d)", d, out, seed)
				}
			}
		}
		for _, d := range q.Close() {
			out++
			if d != out {
				t.Fatalf("left %d, want %d (seed %d)", d, out, seed)
			}
		}
		if out != in {
			t.Fatalf("%d out of %d in", out, in)
		}
	})
	t.Run("ready holds a token while deliveries are queued", func(t *testing.T) {
		q := NewQueue[int]()
		q.Push(1)
		q.Push(2)
		<-q.Ready()
		if got := q.Take(nil, 1); len(got) != 1 || got[0] != 1 {
			t.Fatalf("took %v, want [1]", got)
		}
		select {
		case <-q.Ready():
		default:
			t.Fatal("no token with a delivery still queued")
		}
		q.Take(nil, 1)
		select {
		case <-q.Ready():
			t.Fatal("a token with nothing queued")
		default:
		}
	})
	t.Run("a backlog taken leaves a few spare blocks, not its memory", func(t *testing.T) {
		q := NewQueue[int]()
		for i := range 10 * queueBlock {
			q.Push(i)
		}
		if len(q.blocks) != 10 {
			t.Fatalf("%d blocks for ten blocks' worth", len(q.blocks))
		}
		for len(q.Take(nil, 333)) > 0 {
		}
		if len(q.blocks) != 0 || len(q.spare) != queueSpare || q.n != 0 {
			t.Fatalf("after the backlog: %d blocks, %d spare, %d queued; want 0, %d, 0", len(q.blocks), len(q.spare), q.n, queueSpare)
		}
		q.Push(1)
		if len(q.spare) != queueSpare-1 {
			t.Fatalf("a push after it took no spare block: %d spare", len(q.spare))
		}
		if got := q.Close(); len(got) != 1 || got[0] != 1 {
			t.Fatalf("Close returned %v, want [1]", got)
		}
	})
	t.Run("a closed queue refuses deliveries until it is opened again", func(t *testing.T) {
		q := NewQueue[int]()
		q.Close()
		if q.Push(1) {
			t.Fatal("a closed queue took a delivery")
		}
		q.Open()
		if !q.Push(1) {
			t.Fatal("an opened queue refused a delivery")
		}
	})
}

// benchDelivery is the size of an MQTT delivery, pointers included.
type benchDelivery struct {
	topic, broker, feed string
	payload             []byte
	n                   [16]int64
	p                   *int
}

// BenchmarkQueueBacklog is a session resumed with a backlog: the broker
// sends deliveries faster than batches of 1000 are taken, and the queue
// holds tens of thousands.
func BenchmarkQueueBacklog(b *testing.B) {
	dst := make([]benchDelivery, 0, 1000)
	for b.Loop() {
		q := NewQueue[benchDelivery]() // a daemon's start
		for i := range 50000 {
			q.Push(benchDelivery{topic: "t", n: [16]int64{int64(i)}})
			if i%3 == 0 && i%1000 == 0 {
				dst = q.Take(dst[:0], 1000)
			}
		}
		for len(q.Take(dst[:0], 1000)) > 0 {
		}
	}
}
