package file_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/source/file"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name, line, topic, payload, invalid string
		dup                                 bool
	}{
		{"an object payload is kept byte for byte", `{"topic":"a/b","payload":{"x": 1.50}}`, "a/b", `{"x": 1.50}`, "", false},
		{"a string payload keeps its quotes", `{"topic":"a","payload":"hi \"there\""}`, "a", `"hi \"there\""`, "", false},
		{"a base64 payload is decoded", `{"topic":"a","payload_b64":"AAEC/w==","dup":true}`, "a", "\x00\x01\x02\xff", "", true},
		{"an escaped topic is unescaped", `{"topic":"a\/\u0062","payload":1}`, "a/b", "1", "", false},
		{"a line that is not JSON is invalid", `not json`, "", "", "not a JSON object", false},
		{"a line cut short says so", `{"topic":`, "", "", "not valid JSON: the object is cut short after 9 bytes", false},
		{"a cut-short object says so, not that it is none", `{"topic":"plant/m1/energy","payload":{"msgId":"m1-0","kwh":1.0`, "", "", "not valid JSON: the object is cut short after 62 bytes", false},
		{"a line broken inside names the byte", `{"topic":"a","payload":{"kwh":1.0}x}`, "", "", "not valid JSON at byte 35 of 36: invalid character 'x' after object key:value pair", false},
		{"an array line is invalid", `[1]`, "", "", "not a JSON object", false},
		{"a line without a topic is invalid", `{"payload":{}}`, "", "", "no topic", false},
		{"a numeric topic is invalid", `{"topic":5,"payload":{}}`, "", "", "topic is not a string", false},
		{"a line with both payloads is invalid", `{"topic":"a","payload":{},"payload_b64":""}`, "", "", "both payload and payload_b64", false},
		{"a line with no payload is invalid", `{"topic":"a"}`, "", "", "no payload or payload_b64", false},
		{"bad base64 is invalid", `{"topic":"a","payload_b64":"!!"}`, "", "", "payload_b64: illegal base64", false},
		{"a repeated topic is invalid", `{"topic":"a","payload":1,"topic":"b"}`, "", "", "topic appears more than once", false},
		{"a key named topic inside the payload is not a repeat", `{"topic":"a","payload":{"topic":"x"}}`, "a", `{"topic":"x"}`, "", false},
		{"a string dup is invalid", `{"topic":"a","payload":1,"dup":"yes"}`, "", "", "dup is not a boolean", false},
		{"a topic escaping a surrogate pair is read", `{"topic":"a/\ud83d\ude00","payload":1}`, "a/\U0001F600", "1", "", false},
		{"a topic escaping a lone high surrogate is invalid", `{"topic":"inc/a/\ud800","payload":1}`, "", "", "topic escapes a lone UTF-16 surrogate", false},
		{"a topic escaping a lone low surrogate is invalid", `{"topic":"inc/a/\udc00x","payload":1}`, "", "", "topic escapes a lone UTF-16 surrogate", false},
		{"a high surrogate followed by another is invalid", `{"topic":"inc/\ud800\ud800","payload":1}`, "", "", "topic escapes a lone UTF-16 surrogate", false},
		{"an escaped backslash before u is no escape", `{"topic":"inc/\\ud800","payload":1}`, "inc/\\ud800", "1", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := file.Parse([]byte(c.line), 7, "f")
			if c.invalid != "" {
				if !strings.Contains(m.Invalid, c.invalid) || !strings.Contains(m.Invalid, "capture line 7") || string(m.Payload) != c.line {
					t.Fatalf("got %+v, want invalid %q with the raw line", m, c.invalid)
				}
				return
			}
			if m.Invalid != "" || m.Topic != c.topic || string(m.Payload) != c.payload || m.Dup != c.dup || m.Broker != "f" {
				t.Fatalf("got %+v", m)
			}
		})
	}
}

type recorder struct {
	msgs    []engine.Message
	batches int
	fail    bool
}

func (r *recorder) Process(_ context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	if r.fail {
		return nil, errors.New("disk full")
	}
	r.batches++
	r.msgs = append(r.msgs, msgs...)
	out := make([]engine.Decision, len(msgs))
	for i, m := range msgs {
		if m.Invalid != "" {
			out[i].Outcome = engine.Malformed
		}
	}
	return out, nil
}

func TestIngestReadsEveryLineInBatches(t *testing.T) {
	long := `{"topic":"a","payload":"` + strings.Repeat("x", 300) + `"}`
	feed := "{\"topic\":\"a\",\"payload\":1}\n\n  \n" + long + "\nnot json\n{\"topic\":\"b\",\"payload\":2}" // no final newline
	r := &recorder{}
	sum, err := file.Ingest(context.Background(), r, strings.NewReader(feed), file.Options{BatchSize: 2, MaxLine: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.msgs) != 4 || r.batches != 2 {
		t.Fatalf("%d messages in %d batches, want 4 in 2", len(r.msgs), r.batches)
	}
	if !strings.Contains(r.msgs[1].Invalid, "capture line 4 is 327 bytes, over the 100-byte line limit") || len(r.msgs[1].Payload) != 100 {
		t.Fatalf("an overlong line: %q (%d bytes kept)", r.msgs[1].Invalid, len(r.msgs[1].Payload))
	}
	if r.msgs[3].Topic != "b" || string(r.msgs[3].Payload) != "2" {
		t.Fatalf("the last line without a newline: %+v", r.msgs[3])
	}
	if got := sum.String(); got != "applied=2 applied_late=0 duplicate=0 conflict=0 quarantined=0 malformed=2 total=4" {
		t.Fatalf("summary %q", got)
	}
}

// TestIngestSkipsAByteOrderMark: an editor's byte order mark before the
// first line is not part of the record.
func TestIngestSkipsAByteOrderMark(t *testing.T) {
	r := &recorder{}
	if _, err := file.Ingest(context.Background(), r, strings.NewReader("\uFEFF{\"topic\":\"a\",\"payload\":1}\n"), file.Options{BatchSize: 2, MaxLine: 100}); err != nil {
		t.Fatal(err)
	}
	if len(r.msgs) != 1 || r.msgs[0].Invalid != "" || r.msgs[0].Topic != "a" {
		t.Fatalf("messages %+v", r.msgs)
	}
}

func TestIngestStopsOnACommitError(t *testing.T) {
	r := &recorder{fail: true}
	_, err := file.Ingest(context.Background(), r, strings.NewReader(strings.Repeat("{\"topic\":\"a\",\"payload\":1}\n", 5000)), file.Options{BatchSize: 10})
	if err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("got %v, want the commit error", err)
	}
}

// submitter is an engine that commits ahead: its first batch's commit
// fails, and it counts the waits called of the batches it took.
type submitter struct {
	submitted, waited int
}

func (s *submitter) Process(ctx context.Context, msgs []engine.Message) ([]engine.Decision, error) {
	return nil, errors.New("Process called: Ingest should submit")
}

func (s *submitter) Submit(_ context.Context, msgs []engine.Message) (func() ([]engine.Decision, error), error) {
	s.submitted++
	first := s.submitted == 1
	return func() ([]engine.Decision, error) {
		s.waited++
		if first {
			return nil, errors.New("disk error")
		}
		return nil, fmt.Errorf("%w: a batch before it failed to commit", engine.ErrAborted)
	}, nil
}

// TestIngestWaitsForEveryBatchItSubmitted: a batch submitted before the
// failure of an earlier one is seen is waited for too, so none commits
// unseen, and the error is the first batch's.
func TestIngestWaitsForEveryBatchItSubmitted(t *testing.T) {
	s := &submitter{}
	sum, err := file.Ingest(context.Background(), s, strings.NewReader(strings.Repeat("{\"topic\":\"a\",\"payload\":1}\n", 50)), file.Options{BatchSize: 1})
	if err == nil || !strings.Contains(err.Error(), "disk error") {
		t.Fatalf("got %v, want the first commit's error", err)
	}
	if s.waited != s.submitted || sum.Lines != 0 {
		t.Fatalf("%d batches submitted, %d waited for, %d lines counted", s.submitted, s.waited, sum.Lines)
	}
}
