package engine_test

import (
	"context"
	"testing"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// TestAForwardedPayloadThatChangedUnderItsKeyIsAConflict: a forward
// effect's input is the whole payload, sent on byte for byte, so a message
// under an applied key whose payload differs in a field nothing else reads
// is a conflict (held, never silently dropped), while the same content
// re-serialised (keys reordered, spaces, 1.50 for 1.5) is a duplicate.
func TestAForwardedPayloadThatChangedUnderItsKeyIsAConflict(t *testing.T) {
	ctx := context.Background()
	r := engine.Route{Name: "incidents", Topic: "incidents/#", Source: []string{"source_id"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Forward: &engine.ForwardSpec{Topic: "clean/{topic}"}}}}
	e, err := engine.New(ctx, memory.New(), engine.Options{Routes: []engine.Route{r}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, tc := range []struct {
		payload string
		want    engine.Outcome
	}{
		{`{"msgId":"m1","source_id":"s1","status":"en route","eta":1.5,"crew":["a","b"]}`, engine.Applied},
		{`{ "crew": ["a", "b"], "eta": 1.50, "status": "en route", "source_id": "s1", "msgId": "m1" }`, engine.Duplicate},
		{`{"msgId":"m1","source_id":"s1","status":"on scene","eta":1.5,"crew":["a","b"]}`, engine.Conflict},
		{`{"msgId":"m1","source_id":"s1","status":"en route","eta":1.5,"crew":["a"]}`, engine.Conflict},
	} {
		ds, err := e.Process(ctx, []engine.Message{{Topic: "incidents/x", Payload: []byte(tc.payload)}})
		if err != nil {
			t.Fatal(err)
		}
		if ds[0].Outcome != tc.want {
			t.Errorf("%s: %v (%s), want %v", tc.payload, ds[0].Outcome, ds[0].Reason, tc.want)
		}
	}
}
