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
