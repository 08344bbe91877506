// Package sparkplug reads and writes Eclipse Sparkplug B (3.0) payloads
// for replayguard. RouteKind is the engine's route kind for them (an
// engine.RouteKind, given in engine.Options.Kinds): it reads a topic and
// payload (Decoder turns the protobuf into plain terms), then places each
// message against its edge's committed session at decide time: the epoch
// from bdSeq and rebirths, seq unwrapped in that epoch's window, aliases
// resolved with the birth's tables; what cannot be placed is held. The
// session itself (births, alias tables, devices) is kept in the source's
// window (engine.SparkplugState), committed with it. Edge is a small edge
// node that encodes the births, data and deaths of a session (with its seq
// and bdSeq counters) for tests, ingest files and demos.
//
// The payload types are generated from the Eclipse Tahu definition in
// package sparkplugpb.
//
//	d := sparkplug.Decoder{}
//	edge := sparkplug.NewEdge("plant", "line-1", 0)
//	birth := edge.Birth(time.Now(), []sparkplug.Metric{{Name: "Energy", Datatype: sparkplug.Double, Value: 0.25}})
//	p, err := d.DecodeSparkplug(birth.Payload)
//
// RouteKind and Decoder are safe for concurrent use; an Edge is not.
package sparkplug
