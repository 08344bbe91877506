package sink_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replayguard/replayguard/audit/sink"
	"github.com/replayguard/replayguard/engine"
)

// decideBig commits one decision with a topic level of level bytes: up to
// 1024 it is the source and names the entity (an audit record of about
// 3*level bytes); longer, the message is malformed (one of about level).
func (r *rig) decideBig(t *testing.T, level int) {
	t.Helper()
	m := engine.Message{Topic: "plant/" + strings.Repeat("m", level) + "/energy", Payload: fmt.Appendf(nil, `{"msgId":"big-%d","kwh":1}`, r.next)}
	r.next++
	if _, err := r.e.Process(t.Context(), []engine.Message{m}); err != nil {
		t.Fatal(err)
	}
}

var errStop = errors.New("stop")

// A receiver takes messages up to a limit and truncates or drops the rest
// without a word to the sender: a record larger than the limit is never
// sent whole, but as a stub in its place, counted.
func TestSyslogNeverSendsAMessageOverTheReceiversLimit(t *testing.T) {
	recv := &syslogReceiver{t: t, max: 8192} // rsyslog's default maxMessageSize, the sink's default max_message
	recv.listen("127.0.0.1:0")
	r := newRig(t, "siem", sink.NewSyslog(sink.SyslogOptions{Address: recv.ln.Addr().String(), Timeout: time.Second}))
	r.decide(t, 3)
	r.decideBig(t, 9000)
	r.decide(t, 2)
	r.waitCursor(t, "siem", 6)
	waitCount(t, &recv.recorder, 6)
	recv.close()
	checkReceived(t, recv.get(), 6)
	want := `
# HELP replayguard_audit_sink_oversize_total Audit records a syslog sink sent as a stub, their whole message being over its max_message (a batch sent again counts again).
# TYPE replayguard_audit_sink_oversize_total counter
replayguard_audit_sink_oversize_total{sink="siem"} 1
`
	if err := testutil.CollectAndCompare(r.set, strings.NewReader(want), "replayguard_audit_sink_oversize_total"); err != nil {
		t.Fatal(err)
	}
}

func TestSyslogStubNamesTheRecordItStandsFor(t *testing.T) {
	recv := &syslogReceiver{t: t, max: 4096}
	recv.listen("127.0.0.1:0")
	logs := &tWriter{t: t}
	exp := sink.NewSyslog(sink.SyslogOptions{Address: recv.ln.Addr().String(), Timeout: time.Second, MaxMessage: 4096,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	r := newRig(t, "siem", exp)
	r.decide(t, 1)
	r.decideBig(t, 5000) // about 5 KB: within the default, over 4096
	r.waitCursor(t, "siem", 2)
	waitCount(t, &recv.recorder, 2)
	recv.close()

	var rec engine.AuditRecord
	if err := r.st.ScanAudit(t.Context(), 2, func(a engine.AuditRecord) error { rec = a; return errStop }); err != errStop {
		t.Fatal(err)
	}
	full, err := engine.AppendRecordJSON(nil, &rec)
	if err != nil {
		t.Fatal(err)
	}
	msgs := recv.all.get()
	stub := msgs[len(msgs)-1]
	if !strings.HasPrefix(stub, "<12>1 ") || !strings.Contains(stub, ` - malformed [replayguard@32473 position="2" route="meters" oversize="`) {
		t.Fatalf("stub %q is not a warning (user.warning) naming position 2 and oversize", stub)
	}
	var got struct {
		Position   uint64      `json:"position"`
		Route      string      `json:"route"`
		Outcome    string      `json:"outcome"`
		Key        engine.Hash `json:"key"`
		Prev       engine.Hash `json:"prev"`
		Hash       engine.Hash `json:"hash"`
		Oversize   int         `json:"oversize"`
		MaxMessage int         `json:"max_message"`
	}
	if err := json.Unmarshal([]byte(stub[strings.Index(stub, "] {")+2:]), &got); err != nil {
		t.Fatalf("stub body: %v in %q", err, stub)
	}
	if got.Position != 2 || got.Route != "meters" || got.Outcome != "malformed" || got.Key != rec.Key || got.Prev != rec.Prev ||
		got.Hash != rec.Hash || got.Oversize <= len(full) || got.MaxMessage != 4096 {
		t.Fatalf("stub %+v does not name record %d (hash %s, JSON of %d bytes)", got, rec.Position, rec.Hash, len(full))
	}
	if st := exp.Oversize(); st != 1 {
		t.Fatalf("Oversize() = %d, want 1", st)
	}
	if l := logs.String(); !strings.Contains(l, "too large for the syslog receiver") || !strings.Contains(l, "position=2") ||
		!strings.Contains(l, "max_message=4096") {
		t.Fatalf("no warning naming the record and the limit: %q", l)
	}
}

func TestSyslogMaxMessageBelowTheRFCMinimumIsRaisedToIt(t *testing.T) {
	recv := &syslogReceiver{t: t, max: sink.MinSyslogMaxMessage}
	recv.listen("127.0.0.1:0")
	exp := sink.NewSyslog(sink.SyslogOptions{Address: recv.ln.Addr().String(), Timeout: time.Second, MaxMessage: 100})
	r := newRig(t, "siem", exp)
	r.decide(t, 2)       // about 700 bytes each: whole under 2048
	r.decideBig(t, 1000) // about 3 KB
	r.waitCursor(t, "siem", 3)
	waitCount(t, &recv.recorder, 3)
	recv.close()
	if n := exp.Oversize(); n != 1 {
		t.Fatalf("Oversize() = %d, want 1: only the record over 2048 octets is a stub", n)
	}
}
