package sink

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/replayguard/replayguard/engine"
)

// SyslogOptions configure NewSyslog.
type SyslogOptions struct {
	// Address is the receiver's host:port (TCP).
	Address string
	// AppName is the APP-NAME of every message. Default "replayguard".
	AppName string
	// Facility is the syslog facility code, 0 to 23. Default 1 (user).
	Facility int
	// Timeout bounds connecting and one batch's write. Default 10s.
	Timeout time.Duration
	// TLS, when set, connects over TLS (RFC 5425). Default nil: plain TCP.
	TLS *tls.Config
	// MaxMessage is the largest message, in octets (the count of its
	// frame), the receiver takes whole. A record whose message would be
	// larger is sent as a stub that fits (see Syslog), counted (Oversize)
	// and logged. Default DefaultSyslogMaxMessage; a value below
	// MinSyslogMaxMessage is raised to it.
	MaxMessage int
	// Logger receives a warning per record sent as a stub. Default: discard.
	Logger *slog.Logger
}

// Message sizes of the syslog sink, in octets.
const (
	// DefaultSyslogMaxMessage is the size RFC 5425 §4.3.1 says receivers
	// SHOULD take, and rsyslog's default maxMessageSize.
	DefaultSyslogMaxMessage = 8192
	// MinSyslogMaxMessage is the size every RFC 5425 receiver MUST take; a
	// stub always fits in it.
	MinSyslogMaxMessage = 2048
)

// Syslog writes each record as an RFC 5424 message over TCP, framed by
// octet counting (RFC 6587 §3.4.1): TIMESTAMP is the record's time, MSGID
// its outcome, MSG its canonical JSON.
//
// A receiver truncates or drops a message larger than its limit (RFC 5424
// §6.1), unseen by the sender. So a record whose message would exceed
// MaxMessage is never sent whole: its place in the stream is taken by a
// stub, a warning-severity message whose structured data adds
// oversize="N" (the octets the whole message would take) and whose MSG is
// {"position","time","route","outcome","key","digest","prev","hash",
// "oversize","max_message"}: enough to find the record (audit export
// --from position) and check it against the chain. Stubs are counted
// (Oversize) and logged.
//
// TCP carries no acknowledgement: a
// batch counts as delivered once written to the connection. A connection
// the receiver has closed is noticed before the next write, and the batch
// goes to a new one; records the receiver loses while they are in flight
// (it dies with them unread) cannot be noticed.
type Syslog struct {
	opts     SyslogOptions
	hostname string
	log      *slog.Logger
	conn     net.Conn
	buf      []byte
	json     []byte
	msg      []byte
	oversize atomic.Uint64
}

// NewSyslog returns a syslog exporter; it connects on the first Export.
func NewSyslog(o SyslogOptions) *Syslog {
	if o.AppName == "" {
		o.AppName = "replayguard"
	}
	if o.Facility == 0 {
		o.Facility = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxMessage == 0 {
		o.MaxMessage = DefaultSyslogMaxMessage
	}
	o.MaxMessage = max(o.MaxMessage, MinSyslogMaxMessage)
	o.AppName = printable(o.AppName, 48)
	host, err := os.Hostname()
	if err != nil {
		host = ""
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Syslog{opts: o, hostname: printable(host, 255), log: log}
}

// Oversize returns how many records were sent as stubs since NewSyslog,
// each time one was sent (a batch sent again counts again).
func (s *Syslog) Oversize() uint64 { return s.oversize.Load() }

// Export writes recs, one message each, in one write.
func (s *Syslog) Export(ctx context.Context, recs []engine.AuditRecord) error {
	s.buf = s.buf[:0]
	for i := range recs {
		var err error
		if s.buf, err = s.appendFrame(s.buf, &recs[i]); err != nil {
			return err
		}
	}
	if s.conn != nil && !alive(s.conn) {
		s.drop()
	}
	if s.conn == nil {
		var d interface {
			DialContext(ctx context.Context, network, addr string) (net.Conn, error)
		} = &net.Dialer{Timeout: s.opts.Timeout}
		if s.opts.TLS != nil {
			d = &tls.Dialer{NetDialer: &net.Dialer{Timeout: s.opts.Timeout}, Config: s.opts.TLS}
		}
		c, err := d.DialContext(ctx, "tcp", s.opts.Address)
		if err != nil {
			return fmt.Errorf("syslog: %w", err)
		}
		s.conn = c
	}
	deadline := time.Now().Add(s.opts.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	s.conn.SetWriteDeadline(deadline)
	conn := s.conn
	stop := context.AfterFunc(ctx, func() { conn.SetWriteDeadline(time.Now()) }) // a stopping sink does not wait out the timeout
	_, err := s.conn.Write(s.buf)
	stop()
	if err != nil {
		s.drop()
		return fmt.Errorf("syslog: write to %s: %w", s.opts.Address, err)
	}
	return nil
}

// appendFrame appends one octet-counted RFC 5424 message: the record's, or
// its stub when that would exceed MaxMessage.
func (s *Syslog) appendFrame(dst []byte, r *engine.AuditRecord) ([]byte, error) {
	var err error
	if s.json, err = engine.AppendRecordJSON(s.json[:0], r); err != nil {
		return dst, fmt.Errorf("encode record %d: %w", r.Position, err)
	}
	sev := 6 // informational
	switch r.Outcome {
	case "conflict", "quarantined", "malformed":
		sev = 4 // warning
	}
	s.msg = s.appendMessage(s.msg[:0], r, sev, 0, s.json)
	if len(s.msg) > s.opts.MaxMessage {
		whole := len(s.msg)
		if s.msg, err = s.appendStub(s.msg[:0], r, whole); err != nil {
			return dst, err
		}
		s.oversize.Add(1)
		s.log.Warn("audit record too large for the syslog receiver: sent a stub in its place; audit export holds it whole",
			"position", r.Position, "octets", whole, "max_message", s.opts.MaxMessage)
	}
	dst = strconv.AppendInt(dst, int64(len(s.msg)), 10)
	dst = append(dst, ' ')
	return append(dst, s.msg...), nil
}

// appendMessage appends an RFC 5424 message with MSG body; oversize > 0
// adds the oversize parameter of a stub.
func (s *Syslog) appendMessage(msg []byte, r *engine.AuditRecord, sev, oversize int, body []byte) []byte {
	msg = append(msg, '<')
	msg = strconv.AppendInt(msg, int64(s.opts.Facility*8+sev), 10)
	msg = append(msg, ">1 "...)
	msg = r.Time.UTC().AppendFormat(msg, "2006-01-02T15:04:05.000000Z07:00")
	msg = append(msg, ' ')
	msg = append(msg, s.hostname...)
	msg = append(msg, ' ')
	msg = append(msg, s.opts.AppName...)
	msg = append(msg, " - "...)
	msg = append(msg, printable(r.Outcome, 32)...)
	msg = append(msg, ` [replayguard@32473 position="`...)
	msg = strconv.AppendUint(msg, r.Position, 10)
	msg = append(msg, `" route="`...)
	msg = appendParam(msg, r.Route)
	if oversize > 0 {
		msg = append(msg, `" oversize="`...)
		msg = strconv.AppendInt(msg, int64(oversize), 10)
	}
	msg = append(msg, `"] `...)
	return append(msg, body...)
}

// stub is the MSG of a record too large to send whole.
type stub struct {
	Position   uint64      `json:"position"`
	Time       time.Time   `json:"time"`
	Route      string      `json:"route"`
	Outcome    string      `json:"outcome"`
	Key        engine.Hash `json:"key,omitzero"`
	Digest     engine.Hash `json:"digest,omitzero"`
	Prev       engine.Hash `json:"prev"`
	Hash       engine.Hash `json:"hash"`
	Oversize   int         `json:"oversize"`
	MaxMessage int         `json:"max_message"`
}

// appendStub appends the stub message of r, whose whole message would take
// whole octets, at warning severity. A route too long for the stub is cut.
func (s *Syslog) appendStub(msg []byte, r *engine.AuditRecord, whole int) ([]byte, error) {
	st := stub{Position: r.Position, Time: r.Time, Route: r.Route, Outcome: printable(r.Outcome, 32), Key: r.Key,
		Digest: r.Digest, Prev: r.Prev, Hash: r.Hash, Oversize: whole, MaxMessage: s.opts.MaxMessage}
	for {
		body, err := json.Marshal(st)
		if err != nil {
			return msg, fmt.Errorf("encode the stub of record %d: %w", r.Position, err)
		}
		cut := *r
		cut.Route = st.Route
		out := s.appendMessage(msg, &cut, 4, whole, body)
		if len(out) <= s.opts.MaxMessage {
			return out, nil
		}
		if st.Route == "" {
			return msg, fmt.Errorf("record %d: even its stub exceeds max_message %d", r.Position, s.opts.MaxMessage)
		}
		half := len(st.Route) / 2
		for half > 0 && !utf8.RuneStart(st.Route[half]) { // keep the value UTF-8, as RFC 5424 wants
			half--
		}
		st.Route = st.Route[:half]
	}
}

// appendParam escapes a structured-data value (RFC 5424 §6.3.3).
func appendParam(dst []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '"', '\\', ']':
			dst = append(dst, '\\', c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// printable is a header field: printable US-ASCII, at most n, "-" if empty.
func printable(v string, n int) string {
	out := make([]byte, 0, min(len(v), n))
	for i := 0; i < len(v) && len(out) < n; i++ {
		if c := v[i]; c > 32 && c < 127 {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "-"
	}
	return string(out)
}

// alive reports whether the receiver still holds the connection open: a
// syslog receiver never writes, so anything but a timeout on a short read
// means it closed or reset the connection.
func alive(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := c.Read(b[:])
	c.SetReadDeadline(time.Time{})
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (s *Syslog) drop() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// Close closes the connection.
func (s *Syslog) Close(context.Context) error {
	s.drop()
	return nil
}
