package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/buger/jsonparser"
	"io"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// Processor decides and durably commits a batch; *engine.Engine is one.
type Processor interface {
	Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error)
}

// Preparer decodes messages ahead of Process (*engine.Engine is one):
// Ingest does it on its reading goroutine.
type Preparer interface {
	Prepare(msgs []engine.Message)
}

// Submitter is a Processor that can decide a batch while the previous one
// commits (*engine.Engine is one): Ingest then keeps one commit in flight.
type Submitter interface {
	Submit(ctx context.Context, msgs []engine.Message) (wait func() ([]engine.Decision, error), err error)
}

// DefaultBatchSize is Options.BatchSize's default.
const DefaultBatchSize = 1000

// Options tune Ingest. The zero value is usable.
type Options struct {
	Name      string                   // recorded as the messages' broker; default "file"
	BatchSize int                      // messages per commit; default DefaultBatchSize
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

// Parse turns one capture line into a message. A line it cannot read
// becomes a message with Invalid set and the raw line as payload. It reads
// only the four members it needs, without decoding the payload, in the same
// pass that validates the line (the engine's scan of the payload, which
// extracts the route's fields, is the only other).
func Parse(raw []byte, lineNo int64, name string) engine.Message {
	invalid := func(format string, a ...any) engine.Message {
		return engine.Message{Payload: append([]byte(nil), raw...), Broker: name,
			Invalid: fmt.Sprintf("capture line %d: ", lineNo) + fmt.Sprintf(format, a...)}
	}
	var c captureLine
	switch {
	case len(raw) == 0 || raw[0] != '{':
		return invalid("not a JSON object")
	case !c.scan(raw):
		return invalid("%s", notJSON(raw))
	}
	t, err := jsonparser.ParseString(c.topic)
	switch {
	case c.bad != "":
		return invalid("%s", c.bad)
	case err != nil || t == "":
		return invalid("no topic")
	case engine.LoneSurrogate(string(c.topic)):
		// decoded, it would read as U+FFFD, like any other such topic
		return invalid("topic escapes a lone UTF-16 surrogate (\\uD800 to \\uDFFF), which no UTF-8 topic holds")
	case c.hasP && c.hasB64:
		return invalid("both payload and payload_b64")
	case !c.hasP && !c.hasB64:
		return invalid("no payload or payload_b64")
	}
	m := engine.Message{Topic: t, Dup: c.dup, Broker: name}
	if c.hasB64 {
		s, err := jsonparser.ParseString(c.b64)
		if err == nil {
			m.Payload, err = base64.StdEncoding.DecodeString(s)
		}
		if err != nil {
			return invalid("payload_b64: %v", err)
		}
		return m
	}
	m.Payload = append([]byte(nil), c.payload...)
	return m
}

// notJSON says what is wrong with a line that opens a JSON object and is
// no valid one: cut short (a capture truncated, a write interrupted), or
// the byte where it breaks (counted from 1).
func notJSON(raw []byte) string {
	var v json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(raw)).Decode(&v); errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Sprintf("not valid JSON: the object is cut short after %d bytes", len(raw))
	}
	var syn *json.SyntaxError
	if err := json.Unmarshal(raw, &v); errors.As(err, &syn) {
		return fmt.Sprintf("not valid JSON at byte %d of %d: %v", syn.Offset, len(raw), err)
	}
	return "not a JSON object" // valid to encoding/json, not to the capture's reading of it
}

// captureMembers are the members of a capture line that Parse reads.
var captureMembers = [...]string{"topic", "payload", "payload_b64", "dup"}

// captureLine is what Parse read of a line's members; bad is the first
// thing wrong with them.
type captureLine struct {
	topic, b64   []byte
	payload      []byte
	hasB64, hasP bool
	dup          bool
	bad          string
	seen         [len(captureMembers)]bool
}

// scan reads the line's members in the pass that validates it: false when
// it is not a JSON object.
func (c *captureLine) scan(raw []byte) bool {
	var perr error
	valid := engine.ScanMembers(raw, func(key []byte, esc bool, v []byte) {
		if perr != nil {
			return // the members after a name that does not unescape are not read
		}
		if esc {
			var buf [64]byte
			k, err := jsonparser.Unescape(key, buf[:])
			if err != nil {
				perr = jsonparser.MalformedStringEscapeError
				return
			}
			key = k
		}
		v, vt := valueOf(v)
		c.visit(key, v, vt)
	})
	if perr != nil && c.bad == "" {
		c.bad = perr.Error()
	}
	return valid
}

// visit takes one member of the line.
func (c *captureLine) visit(key, v []byte, vt jsonparser.ValueType) {
	i := slices.Index(captureMembers[:], string(key))
	switch {
	case i < 0:
		return // other members are ignored
	case c.seen[i]:
		c.bad = captureMembers[i] + " appears more than once"
	case i == 0 && vt == jsonparser.String:
		c.topic = v
	case i == 0:
		c.bad = "topic is not a string"
	case i == 1:
		c.payload, c.hasP = v, true
		if vt == jsonparser.String { // v is the literal's escaped content: put its quotes back
			c.payload = append(append([]byte{'"'}, v...), '"')
		}
	case i == 2 && vt == jsonparser.String:
		c.b64, c.hasB64 = v, true
	case i == 2:
		c.bad = "payload_b64 is not a string"
	case i == 3 && vt == jsonparser.Boolean:
		c.dup = string(v) == "true"
	case i == 3:
		c.bad = "dup is not a boolean"
	}
	c.seen[i] = true
}

// valueOf returns a valid JSON value's bytes and type as jsonparser reports
// an object member: a string without its quotes.
func valueOf(v []byte) ([]byte, jsonparser.ValueType) {
	switch c := v[0]; {
	case c == '"':
		return v[1 : len(v)-1], jsonparser.String
	case c == '{':
		return v, jsonparser.Object
	case c == '[':
		return v, jsonparser.Array
	case c == 't' || c == 'f':
		return v, jsonparser.Boolean
	case c == 'n':
		return v, jsonparser.Null
	default:
		return v, jsonparser.Number
	}
}

// Ingest reads the capture to its end, deciding it batch by batch. Lines
// are read and parsed on a second goroutine while the previous batch is
// decided and committed; Ingest waits for it before returning.
func Ingest(ctx context.Context, p Processor, r io.Reader, opts Options) (Summary, error) {
	if opts.Name == "" {
		opts.Name = "file"
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.MaxLine <= 0 {
		opts.MaxLine = 16 << 20
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan batch, 2)
	var readErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(batches)
		prep, _ := p.(Preparer)
		readErr = read(ctx, r, opts, prep, batches)
	}()
	sum := Summary{Outcomes: map[engine.Outcome]int64{}}
	var err error
	// The batches submitted whose commits are not waited for yet, oldest
	// first: while commits are what holds the ingest back, the next ones
	// are decided meanwhile, and the engine writes those that wait in one
	// commit.
	var inFlight []func() error
	settle := func(keep int) {
		for len(inFlight) > keep {
			if werr := inFlight[0](); werr != nil && err == nil {
				err = werr
				cancel()
			}
			inFlight = inFlight[1:]
		}
	}
	for b := range batches {
		if err != nil {
			continue // drain so the reader can finish
		}
		wait, serr := submit(ctx, p, b.msgs)
		if serr != nil {
			settle(0) // an earlier batch's failure comes first
			if err == nil {
				err = serr
				cancel()
			}
			continue
		}
		inFlight = append(inFlight, func() error {
			ds, err := wait()
			if err != nil {
				return err
			}
			for _, d := range ds {
				sum.Outcomes[d.Outcome]++
			}
			sum.Lines += int64(len(b.msgs))
			if opts.Progress != nil {
				opts.Progress(sum.Lines, b.read)
			}
			return nil
		})
		settle(maxInFlight)
		if err != nil {
			settle(0)
		}
	}
	settle(0)
	<-done
	if err != nil {
		return sum, err
	}
	return sum, readErr
}

// maxInFlight bounds the batches Ingest has submitted and not yet seen
// committed.
const maxInFlight = 4

// submit starts a batch through the Submitter path when p has one.
func submit(ctx context.Context, p Processor, msgs []engine.Message) (func() ([]engine.Decision, error), error) {
	if s, ok := p.(Submitter); ok {
		return s.Submit(ctx, msgs)
	}
	ds, err := p.Process(ctx, msgs)
	return func() ([]engine.Decision, error) { return ds, err }, nil
}

type batch struct {
	msgs []engine.Message
	read int64 // bytes read up to the batch's end
}

// read parses the capture into batches.
func read(ctx context.Context, r io.Reader, opts Options, prep Preparer, out chan<- batch) error {
	br := bufio.NewReaderSize(r, 256<<10)
	cur := batch{msgs: make([]engine.Message, 0, opts.BatchSize)}
	var lineNo int64
	var buf []byte
	for {
		// Room for the line ending too: MaxLine bounds the line, not its
		// ending, and a line of exactly MaxLine bytes is read.
		raw, size, err := readLine(br, opts.MaxLine+2, &buf)
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if size > 0 {
			lineNo++
			cur.read += size
			length := size - int64(len(raw)-len(bytes.TrimSuffix(bytes.TrimSuffix(raw, []byte("\n")), []byte("\r"))))
			if lineNo == 1 {
				raw = bytes.TrimPrefix(raw, []byte("\uFEFF")) // a byte order mark some editors write
			}
			if raw = bytes.TrimSpace(raw); length > int64(opts.MaxLine) {
				raw = raw[:min(len(raw), opts.MaxLine)]
				cur.msgs = append(cur.msgs, engine.Message{Payload: append([]byte(nil), raw...), Broker: opts.Name,
					Invalid: fmt.Sprintf("capture line %d is %d bytes, over the %d-byte line limit (first bytes kept)", lineNo, size, opts.MaxLine)})
			} else if len(raw) > 0 {
				cur.msgs = append(cur.msgs, Parse(raw, lineNo, opts.Name))
			}
		}
		if len(cur.msgs) == opts.BatchSize || (errors.Is(err, io.EOF) && len(cur.msgs) > 0) {
			if prep != nil {
				prep.Prepare(cur.msgs)
			}
			select {
			case out <- cur:
			case <-ctx.Done():
				return ctx.Err()
			}
			cur = batch{msgs: make([]engine.Message, 0, opts.BatchSize), read: cur.read}
		}
		if errors.Is(err, io.EOF) {
			return nil
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
