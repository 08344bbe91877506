package config

import "testing"

// A whole-number setting written with a fraction is refused, naming the
// setting: yaml would cut 2.5 to 2 without a word.
func TestAFractionForAWholeNumberIsRefused(t *testing.T) {
	checkProblems(t, "mqtt: {batch_size: 2.5}\n",
		`mqtt.batch_size: want a whole number, got 2.5`)
	checkProblems(t, "window:\n  sequence_span: 4096.9\n",
		`window.sequence_span: want a whole number, got 4096.9`)
	checkProblems(t, route(ok, "qos: 1.7"),
		`routes[0] (r).qos: want a whole number, got 1.7`)
	checkProblems(t, "window: {max_entries: 1e6}\n") // a whole number in another form
}
