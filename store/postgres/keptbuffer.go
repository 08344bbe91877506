package postgres

import "sync"

// keptBuffer keeps one buffer from a batch's write for the next one's: a
// batch's audit COPY data is about a megabyte, made anew, and grown
// several times, for every batch otherwise. A write that finds it taken
// (another write of the same handle at once) makes its own.
type keptBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// maxKeptBuffer bounds what a handle keeps between batches.
const maxKeptBuffer = 16 << 20

// take returns the kept buffer, or nil, and keeps none until give.
func (k *keptBuffer) take() []byte {
	k.mu.Lock()
	defer k.mu.Unlock()
	b := k.buf
	k.buf = nil
	return b
}

// give keeps b, which its writer no longer uses, for the next take.
func (k *keptBuffer) give(b []byte) {
	if cap(b) > maxKeptBuffer {
		return
	}
	k.mu.Lock()
	k.buf = b
	k.mu.Unlock()
}
