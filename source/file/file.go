package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// Processor decides and durably commits a batch; *engine.Engine is one.
type Processor interface {
	Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error)
}

// Options tune Ingest. The zero value is usable.
type Options struct {
	Name      string                   // recorded as the messages' broker; default "file"
	BatchSize int                      // messages per commit; default 1000
	MaxLine   int                      // longest line read, bytes; default 16 MiB
	Progress  func(lines, bytes int64) // called after each batch; optional
}

// Summary counts the decisions of one ingest.
type Summary struct {
	Lines    int64
	Outcomes map[engine.Outcome]int64
}

// String is the summary line: every outcome with its count.
func (s Summary) String() string {
	var b strings.Builder
	for _, o := range engine.Outcomes() {
		fmt.Fprintf(&b, "%s=%d ", o, s.Outcomes[o])
	}
	fmt.Fprintf(&b, "total=%d", s.Lines)
	return b.String()
}

type line struct {
	Topic      *string         `json:"topic"`
	Payload    json.RawMessage `json:"payload"`
	PayloadB64 *string         `json:"payload_b64"`
	Dup        bool            `json:"dup"`
}

// Parse turns one capture line into a message. A line it cannot read
// becomes a message with Invalid set and the raw line as payload.
func Parse(raw []byte, lineNo int64, name string) engine.Message {
	invalid := func(format string, a ...any) engine.Message {
		return engine.Message{Payload: append([]byte(nil), raw...), Broker: name,
			Invalid: fmt.Sprintf("capture line %d: ", lineNo) + fmt.Sprintf(format, a...)}
	}
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return invalid("not a capture record: %v", err)
	}
	m := engine.Message{Dup: l.Dup, Broker: name}
	switch {
	case l.Topic == nil || *l.Topic == "":
		return invalid("no topic")
	case l.Payload != nil && l.PayloadB64 != nil:
		return invalid("both payload and payload_b64")
	case l.PayloadB64 != nil:
		p, err := base64.StdEncoding.DecodeString(*l.PayloadB64)
		if err != nil {
			return invalid("payload_b64: %v", err)
		}
		m.Payload = p
	case l.Payload != nil:
		m.Payload = append([]byte(nil), l.Payload...)
	default:
		return invalid("no payload or payload_b64")
	}
	m.Topic = *l.Topic
	return m
}

// Ingest reads the capture to its end, deciding it batch by batch.
func Ingest(ctx context.Context, p Processor, r io.Reader, opts Options) (Summary, error) {
	if opts.Name == "" {
		opts.Name = "file"
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = 1000
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = 16 << 20
	}
	sum := Summary{Outcomes: map[engine.Outcome]int64{}}
	br := bufio.NewReaderSize(r, 256<<10)
	batch := make([]engine.Message, 0, opts.BatchSize)
	var read int64
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ds, err := p.Process(ctx, batch)
		if err != nil {
			return err
		}
		for _, d := range ds {
			sum.Outcomes[d.Outcome]++
		}
		sum.Lines += int64(len(batch))
		batch = batch[:0]
		if opts.Progress != nil {
			opts.Progress(sum.Lines, read)
		}
		return nil
	}
	var lineNo int64
	var buf []byte
	for {
		raw, size, err := readLine(br, opts.MaxLine, &buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return sum, err
		}
		if size > 0 {
			lineNo++
			read += int64(size)
			if raw = bytes.TrimSpace(raw); size > int64(opts.MaxLine) {
				batch = append(batch, engine.Message{Payload: append([]byte(nil), raw...), Broker: opts.Name,
					Invalid: fmt.Sprintf("capture line %d is %d bytes, over the %d-byte line limit (first bytes kept)", lineNo, size, opts.MaxLine)})
			} else if len(raw) > 0 {
				batch = append(batch, Parse(raw, lineNo, opts.Name))
			}
		}
		if len(batch) == opts.BatchSize || (errors.Is(err, io.EOF) && len(batch) > 0) {
			if ferr := flush(); ferr != nil {
				return sum, ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return sum, nil
		}
	}
}

// readLine reads one line. It keeps at most max bytes of it in *buf but
// reports the whole line's size, so an overlong line is consumed, not split.
func readLine(br *bufio.Reader, max int, buf *[]byte) (line []byte, size int64, err error) {
	*buf = (*buf)[:0]
	for {
		chunk, err := br.ReadSlice('\n')
		size += int64(len(chunk))
		if room := max - len(*buf); room > 0 {
			*buf = append(*buf, chunk[:min(room, len(chunk))]...)
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return *buf, size, err
		}
	}
}
