package engine_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
)

// A meter reading delivered twice, the second time by a broker that failed
// over, is applied once.
func Example() {
	ctx := context.Background()
	e, err := engine.New(ctx, memory.New(), engine.Options{Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}}})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	reading := engine.Message{Topic: "plant/meter-3/energy", Payload: []byte(`{"msgId":"meter-3-000042","kwh":0.25}`)}
	ds, err := e.Process(ctx, []engine.Message{reading, reading})
	if err != nil {
		panic(err)
	}
	state, _ := json.Marshal(engine.StateJSON(e.State()))
	fmt.Println(ds[0].Outcome, ds[1].Outcome, string(state))
	// Output: applied duplicate {"meter/meter-3":{"kwh":0.25}}
}
