package file_test

import (
	"context"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/source/file"
)

// TestALineOfExactlyMaxLineBytesIsRead: MaxLine is the longest line read;
// its newline is not part of the line. A line of exactly MaxLine bytes is
// decided like the same line at the end of the file, without a newline.
func TestALineOfExactlyMaxLineBytesIsRead(t *testing.T) {
	line := `{"topic":"a","payload":"` + strings.Repeat("x", 100-26) + `"}`
	if len(line) != 100 {
		t.Fatalf("line of %d bytes", len(line))
	}
	for _, feed := range []string{line, line + "\n", line + "\r\n"} {
		r := &recorder{}
		if _, err := file.Ingest(context.Background(), r, strings.NewReader(feed), file.Options{MaxLine: 100}); err != nil {
			t.Fatal(err)
		}
		if len(r.msgs) != 1 || r.msgs[0].Invalid != "" || r.msgs[0].Topic != "a" {
			t.Fatalf("feed %q: got %+v, want the line read", feed[len(feed)-3:], r.msgs)
		}
	}
}
