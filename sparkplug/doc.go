// Package sparkplug reads and writes Eclipse Sparkplug B (3.0) payloads
// for replayguard: Decoder turns a payload into the engine's plain terms
// for routes of kind sparkplug, and Edge is a small edge node that encodes
// the births, data and deaths of a session (with its seq and bdSeq
// counters) for tests, ingest files and demos.
//
// The payload types are generated from the Eclipse Tahu definition in
// package sparkplugpb.
//
//	d := sparkplug.Decoder{}
//	edge := sparkplug.NewEdge("plant", "line-1", 0)
//	birth := edge.Birth(time.Now(), []sparkplug.Metric{{Name: "Energy", Datatype: sparkplug.Double, Value: 0.25}})
//	p, err := d.DecodeSparkplug(birth.Payload)
//
// A Decoder is safe for concurrent use; an Edge is not.
package sparkplug
