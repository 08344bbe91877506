// Package demo plays replayguard's failover stories end to end, in-process,
// with nothing to install: `replayguard demo [--story incident|plant|redundant]`.
//
// A story is data and a few hooks (story): the messages of its three acts,
// replayguard's configuration, how a consumer that trusts every delivery
// applies one, the truth, and its own lines in the narration. Both stories
// run on the same machinery: embedded mochi-mqtt brokers (the feed's
// primary and, from the failover, its standby) keep their sessions in bbolt
// files written synchronously (sessionStore, the demo's own mochi storage
// hook, which also makes a restored session resend in the original order,
// as MQTT requires and mochi alone does not). Two consumers with persistent
// sessions read the feed side by side: a naive one that applies and
// acknowledges every delivery, and replayguard (source/mqtt over the
// engine, on an embedded store, opened the way `run` opens it, with the
// dashboard served meanwhile).
//
// The standby's state predates the consumers' acknowledgements, honestly:
// the first messages arrive while both consumers are offline, so the
// primary holds them in their sessions; the primary then stops for a moment
// to copy its store (the standby's checkpoint) and starts again on it; the
// consumers come back, apply and acknowledge. When the primary fails, the
// consumers reconnect to the standby started from the checkpoint, and the
// standby's own session resend redelivers messages both consumers already
// applied. Nothing is injected: every replay is a broker redelivery.
//
// The incident story (the default): a field gateway publishes an incident
// (a structure fire, three casualties, engine E7 assigned then released,
// ambulance M3) at QoS 1 to incidents/<agency>/<source>. replayguard's
// route forwards what it applies: its outbox drainer (package forward, as
// `run` runs it) publishes each applied report to clean/<topic> on a third
// broker, the COP broker of the dispatch centre, where a dispatch board,
// auto-acking like the naive console, builds its picture from the first
// copy of each replayguard-key. The COP broker is not part of the failover
// on purpose: the outbox is done with a copy once the broker it publishes
// to has PUBACKed it, so a clean stream through a broker pair that fails
// over to a stale checkpoint would be only as good as that checkpoint (a
// PUBACKed copy the standby never saw is lost, and nothing sends it again);
// the dispatch centre's own broker is where a user puts it. It is also the
// less fragile choice: the drainer's output keeps one connection through
// the story.
//
// The plant story: a plant's energy meter is a Sparkplug B edge node
// (sparkplug.Edge, group plant, edge meter-3). Its NBIRTH carries bdSeq and
// names Energy/kWh (each interval's energy) and Status with their aliases;
// NDATA sends Energy/kWh by alias. Session 7 (its birth and four readings)
// is what the primary holds and the checkpoint copies; the checkpoint's
// restart ends the edge node's connection, which keeps no session, so it
// comes back as session 8, whose 270 readings take the seq across 255 → 0;
// after the failover it starts session 9 on the standby. The naive consumer
// is a Sparkplug host that resolves aliases from the last NBIRTH and bills
// every delivery, so the standby's resend of session 7 is billed twice;
// replayguard's route of kind sparkplug adds metrics.Energy/kWh to
// meter/<edge> exactly once; the truth is the meter's own register. There
// is no clean stream in this story. The edge node registers no NDEATH Will:
// the in-process primary would publish it at the checkpoint's restart and
// even at its crash, which a crashed broker cannot.
//
// The redundant story: the incident story's reports on two broker paths,
// each a broker of its own with no standby. The field gateway publishes
// each report to path a, then to path b; replayguard consumes both at once
// (mqtt.feeds, a runner of its own here like internal/app's), so b's copy
// of each report is a duplicate; the naive consumer reads one path at a
// time and kept a session on b from before the story. When a's primary
// dies, the naive consumer fails over to b, whose old session resends what
// it applied; replayguard goes on from b, and the narration counts each
// feed's firsts and duplicates from its audit records and how soon the
// reports published while a was down were applied.
//
//	err := demo.Run(ctx, os.Stdout, demo.Options{Story: demo.StoryPlant, Hold: 5 * time.Minute})
//
// Run narrates on stdout and ends with the pictures (naive, replayguard,
// in the incident story the dispatch board) next to the truth. It returns
// nil only when replayguard's picture (and the board's, whose distinct keys
// must be the reports replayguard applied) is exact, replayguard's audit
// chain verifies, and the naive picture is wrong. Every listener is on
// 127.0.0.1; Run owns every goroutine it starts and returns after all have
// stopped. Concurrent calls are independent: each has its own brokers,
// store, directories and ports.
package demo
