package config_test

import (
	"fmt"

	"github.com/replayguard/replayguard/config"
)

func Example() {
	file := []byte(`
store: {kind: memory}
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[1]"]
    id: msgId
    effects:
      - entity: "meter/{topic[1]}"
        add: {kwh: kwh}
mqtt:
  client_id: ${CLIENT_ID:-replayguard-1}
`)
	env := map[string]string{"REPLAYGUARD_HTTP_LISTEN": "off"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	c, err := config.Parse(file, "replayguard.yaml", getenv)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Store.Kind, c.Routes[0].Name, *c.Routes[0].QoS, c.Window.TTL, c.MQTT.ClientID)
	fmt.Println("http enabled:", c.HTTP.Enabled())
	fmt.Println("run:", c.ValidateRun())
	// Output:
	// memory meters 1 2h replayguard-1
	// http enabled: false
	// run: <nil>
}

func ExampleParse_problems() {
	file := []byte(`
routes:
  - name: meters
    topic: plant/+/energy
    source: ["topic[3]"]
    qos: 0
`)
	_, err := config.Parse(file, "replayguard.yaml", nil)
	fmt.Println(err)
	// Output:
	// replayguard.yaml:3: routes[0] (meters): neither sequence nor id is set: a route needs one to build an idempotency key
	// replayguard.yaml:5: routes[0] (meters).source[0]: topic[3] is out of range: topic "plant/+/energy" has 3 levels, numbered from 0 (topic[0] to topic[2])
	// replayguard.yaml:6: routes[0] (meters).qos: qos 0 is refused: exactly-once needs acknowledged delivery; use 1 or 2
}

func ExampleParseTemplate() {
	t, _ := config.ParseTemplate("site/{topic[1]}/{meter.id}")
	for _, p := range t.Parts {
		if p.Path != nil {
			fmt.Printf("path %s (topic level: %v)\n", p.Path, p.Path.Topic)
		} else {
			fmt.Printf("literal %q\n", p.Literal)
		}
	}
	// Output:
	// literal "site/"
	// path topic[1] (topic level: true)
	// literal "/"
	// path meter.id (topic level: false)
}
