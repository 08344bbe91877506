package web_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/memory"
	"github.com/replayguard/replayguard/web"
)

// The API over an engine: the state answers what `replayguard state --json`
// prints.
func Example() {
	ctx := context.Background()
	store := memory.New()
	hub := web.NewHub()
	eng, err := engine.New(ctx, store, engine.Options{Observer: hub, Routes: []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}}})
	if err != nil {
		panic(err)
	}
	defer eng.Close()
	reading := engine.Message{Topic: "plant/meter-3/energy", Payload: []byte(`{"msgId":"m-1","kwh":0.25}`)}
	eng.Process(ctx, []engine.Message{reading, reading}) // the second is a replay

	srv := web.New(web.Config{}, web.Deps{Engine: eng, Audit: store, Quarantine: store, Hub: hub})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1:9780/api/v1/state", nil))
	body, _ := io.ReadAll(rec.Result().Body)
	fmt.Print(string(body))
	// Output:
	// {
	//   "meter/meter-3": {
	//     "kwh": 0.25
	//   }
	// }
}
