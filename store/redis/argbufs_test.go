package redis

import "testing"

func TestArgBufsKeepTheirBuffersButNotAnOversizedOne(t *testing.T) {
	f := make(argBufs, 2)
	b := f.get()
	*b = make([]byte, 0, 1<<20)
	f.put(b)
	if got := f.get(); got != b {
		t.Fatal("a buffer put back was not the one got next")
	}
	big := &[]byte{}
	*big = make([]byte, 0, maxKeptBuf+1)
	f.put(big)
	if got := f.get(); got == big || cap(*got) != 0 {
		t.Fatalf("a buffer of %d bytes was kept", cap(*got))
	}
	var none argBufs // a Store's zero value: keeps nothing, blocks nowhere
	none.put(b)
	if got := none.get(); got == b {
		t.Fatal("the zero value kept a buffer")
	}
}
