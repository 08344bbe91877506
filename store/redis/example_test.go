package redis_test

import (
	"context"
	"fmt"
	"os"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/store/redis"
)

// Two members of a group share one server: what one applies, the other
// finds a duplicate. (The example needs a durable Redis at
// REPLAYGUARD_EXAMPLE_REDIS, e.g. redis://127.0.0.1:6379/0, so it is not run.)
func Example() {
	ctx := context.Background()
	routes := []engine.Route{{Name: "meters", Topic: "plant/+/energy", Source: []string{"topic[1]"}, ID: "msgId"}}
	msg := engine.Message{Topic: "plant/m3/energy", Payload: []byte(`{"msgId":"m3-000042"}`)}
	for _, member := range []string{"replayguard-1", "replayguard-2"} {
		s, err := redis.Open(ctx, redis.Options{URL: os.Getenv("REPLAYGUARD_EXAMPLE_REDIS"), Member: member, Prefix: "{plant-7}:"})
		if err != nil {
			panic(err) // a second process under the same member id: engine.ErrMemberHeld
		}
		e, err := engine.New(ctx, s, engine.Options{Routes: routes})
		if err != nil {
			panic(err)
		}
		d, err := e.Process(ctx, []engine.Message{msg})
		if err != nil {
			panic(err)
		}
		fmt.Println(member, d[0].Outcome)
		_ = e.Close()
		_ = s.Close()
	}
}
