package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

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
}

// Syslog writes each record as an RFC 5424 message over TCP, framed by
// octet counting (RFC 6587 §3.4.1): TIMESTAMP is the record's time, MSGID
// its outcome, MSG its canonical JSON. TCP carries no acknowledgement: a
// batch counts as delivered once written to the connection. A connection
// the receiver has closed is noticed before the next write, and the batch
// goes to a new one; records the receiver loses while they are in flight
// (it dies with them unread) cannot be noticed.
type Syslog struct {
	opts     SyslogOptions
	hostname string
	conn     net.Conn
	buf      []byte
	json     []byte
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
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "-"
	}
	return &Syslog{opts: o, hostname: host}
}

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

// appendFrame appends one octet-counted RFC 5424 message.
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
	msg := make([]byte, 0, len(s.json)+160)
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
	msg = append(msg, `"] `...)
	msg = append(msg, s.json...)
	dst = strconv.AppendInt(dst, int64(len(msg)), 10)
	dst = append(dst, ' ')
	return append(dst, msg...), nil
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
