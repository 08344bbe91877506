package postgres_test

import (
	"context"
	"fmt"
	"log"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/postgres"
)

// Two members of a consumer group share one schema; each runs an engine
// on its own handle. A reading delivered to both is applied once. (Not run:
// it needs a server.)
func Example() {
	ctx := context.Background()
	routes := []engine.Route{{
		Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId",
		Effects: []engine.EffectSpec{{Entity: "meter/{topic[1]}", Add: map[string]string{"kwh": "kwh"}}},
	}}
	var engines []*engine.Engine
	for _, member := range []string{"replayguard-1", "replayguard-2"} {
		s, err := postgres.Open(ctx, postgres.Options{URL: "postgres://replayguard@db.example/replayguard", Member: member})
		if err != nil {
			log.Fatal(err)
		}
		defer s.Close()
		e, err := engine.New(ctx, s, engine.Options{Routes: routes})
		if err != nil {
			log.Fatal(err)
		}
		defer e.Close()
		engines = append(engines, e)
	}
	reading := engine.Message{Topic: "plant/meter-3/energy", Payload: []byte(`{"msgId":"meter-3-000042","kwh":0.25}`)}
	for _, e := range engines {
		ds, err := e.Process(ctx, []engine.Message{reading})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ds[0].Outcome) // applied, then duplicate
	}
}
