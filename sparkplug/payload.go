package sparkplug

// Payload is a decoded Sparkplug B payload.
type Payload struct {
	Timestamp    uint64 // ms since the Unix epoch, when HasTimestamp
	HasTimestamp bool
	Seq          uint64 // when HasSeq; the engine refuses one above 255
	HasSeq       bool
	BdSeq        uint64 // the value of the metric named "bdSeq", when HasBdSeq
	HasBdSeq     bool
	Metrics      []PayloadMetric
}

// PayloadMetric is one metric of a payload, named or aliased.
type PayloadMetric struct {
	Name         string // "" when only the alias names it
	Alias        uint64
	HasAlias     bool
	Timestamp    uint64
	HasTimestamp bool
	// Historical is the metric's is_historical flag: a value the edge
	// acquired before and sends late (store and forward after an outage,
	// a batch), not the metric's current value. (is_transient is not
	// read: it asks a historian not to store the value, and sets nothing.)
	Historical bool
	Datatype   uint32 // Sparkplug DataType; 0 when the payload leaves it out
	Value      MetricValue
}

// MetricValue is a metric's value in plain terms.
type MetricValue struct {
	Kind ValueKind
	// Text is a number's exact decimal text (floats in their shortest
	// round-trip form), a string, "true" or "false"; for an unsupported
	// value, the name of its type.
	Text string
	// Bits and Width are an integer's wire bits (Width 32 for int_value, 64
	// for long_value, else 0): a metric whose datatype only its birth
	// certificate names is read again with that type (a signed Int8 sent
	// as 0xffffffff is -1).
	Bits  uint64
	Width uint8
	// Content is an unsupported value's canonical bytes, for the digest.
	Content string
}

// ValueKind is the kind of a metric value.
type ValueKind uint8

// The value kinds. Unsupported values (datasets, templates, bytes, files,
// arrays, NaN and infinities) take part in the digest but are refused as
// effect inputs.
const (
	ValueNumber ValueKind = iota
	ValueString
	ValueBool
	ValueNull
	ValueUnsupported
)
