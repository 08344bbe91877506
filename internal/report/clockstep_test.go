package report_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/internal/report"
	"github.com/replayguard/replayguard/store/memory"
)

// After the wall clock steps back, audit times are no longer in position
// order. explain --at must still show a picture that adds up: the state
// it names is the state after the changes it lists.
func TestLineageAtAfterTheClockSteppedBack(t *testing.T) {
	ctx := context.Background()
	s := memory.New()
	clock := start
	e, err := engine.New(ctx, s, engine.Options{Routes: lineageRoutes, Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	reading := func(id, kwh string) engine.Message {
		return engine.Message{Topic: "plant/m1/energy", Payload: []byte(`{"msgId":"` + id + `","kwh":` + kwh + `}`)}
	}
	if _, err := e.Process(ctx, []engine.Message{reading("r1", "1")}); err != nil {
		t.Fatal(err)
	}
	clock = start.Add(-time.Hour) // NTP steps the clock back an hour
	if _, err := e.Process(ctx, []engine.Message{reading("r2", "2")}); err != nil {
		t.Fatal(err)
	}
	ls, err := report.Lineages(report.Records(ctx, s, nil), report.LineageOptions{Entities: []string{"meter/m1"}, At: start.Add(-30 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	sum := 0.0
	for _, c := range l.Changes {
		for _, ef := range c.Effects {
			var v float64
			if _, err := fmtSscan(string(ef.Value), &v); err != nil {
				t.Fatal(err)
			}
			sum += v
		}
	}
	if got := string(l.State["kwh"]); got != "" && got != fmtNum(sum) {
		t.Fatalf("explain --at: kwh %s, but the changes it lists add up to %s (%d changes)", got, fmtNum(sum), len(l.Changes))
	}
}

func fmtSscan(s string, v *float64) (int, error) { return fmt.Sscan(s, v) }
func fmtNum(f float64) string                    { return strconv.FormatFloat(f, 'f', -1, 64) }
