package source_test

import (
	"testing"

	"github.com/replayguard/replayguard/source"
)

func TestEventKindNames(t *testing.T) {
	for _, c := range []struct {
		name string
		kind source.EventKind
		want string
	}{
		{"the first kind has its name", source.Connected, "connected"},
		{"a kind of two words is snake case", source.AckDropped, "ack_dropped"},
		{"the last kind has its name", source.SubscribeRefused, "subscribe_refused"},
		{"a kind past the last is unknown", source.SubscribeRefused + 1, "unknown"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.kind.String(); got != c.want {
				t.Fatalf("String() = %q, want %q", got, c.want)
			}
		})
	}
}
