package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// loadRefused is a group's store whose Load fails: what the engine reads
// of the group's rows must come through its Scan.
type loadRefused struct{ sharedBackend }

func (l loadRefused) Capabilities() engine.Capabilities {
	c := l.sharedBackend.Capabilities()
	c.Shared = l
	return c
}

func (loadRefused) Load(context.Context) (*engine.Snapshot, error) {
	return nil, errors.New("Load called: a group's rows are read whole")
}

// The state, the sources and the gap count of a group are read one row
// at a time through the store's scan, as on a single-owner store that
// reads rows lazily: a dashboard or a scrape of a group with a million
// meters does not hold them all.
func TestAGroupsRowsAreScannedNotLoaded(t *testing.T) {
	ctx := t.Context()
	m, err := memory.NewGroup(0, 0).Open("m1")
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, loadRefused{m}, engine.Options{Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, Sequence: "seq",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var msgs []engine.Message
	for _, meter := range []string{"m5", "m3", "m1", "m4", "m2"} {
		for _, seq := range []int{1, 2, 5} { // 3 and 4 missing: two open gaps a meter
			if meter == "m2" && seq == 5 {
				continue
			}
			msgs = append(msgs, engine.Message{Topic: "plant/" + meter + "/energy", Payload: fmt.Appendf(nil, `{"seq":%d,"kwh":1}`, seq)})
		}
	}
	if _, err := e.Process(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	state, total, err := e.ReadStateUpTo(ctx, 2)
	if err != nil || total != 5 || len(state) != 2 || state[0].Name != "meter/m1" || state[1].Name != "meter/m2" {
		t.Errorf("ReadStateUpTo(2) = %d states %v of %d, %v; want meter/m1 and meter/m2 of 5", len(state), state, total, err)
	}
	if state, total, err := e.ReadStateUpTo(ctx, 10); err != nil || total != 5 || len(state) != 5 {
		t.Errorf("ReadStateUpTo(10) = %d states of %d, %v; want 5 of 5", len(state), total, err)
	}
	sel, err := e.ReadSourcesUpTo(ctx, 2)
	if err != nil || sel.Total != 5 || sel.OpenGaps != 8 || len(sel.Reports) != 2 || len(sel.Reports[0].Gaps) == 0 {
		t.Errorf("ReadSourcesUpTo(2) = %+v, %v; want 2 windows with gaps of 5, 8 open gaps", sel, err)
	}
	if n, gaps, err := e.CountGaps(ctx); err != nil || n != 5 || gaps != 8 {
		t.Errorf("CountGaps = %d, %d, %v; want 5 windows, 8 open gaps", n, gaps, err)
	}
}
