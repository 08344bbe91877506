package demo

import (
	"fmt"
	"slices"
	"strings"

	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/sparkplug"
)

// The plant story's own lines in the narration.

// plantIntro introduces the edge node and replayguard's route.
func plantIntro(d *demo) {
	d.out.plain("  edge node        %s/%s/{NBIRTH|NDATA}/%s: the plant's energy meter, a Sparkplug B edge node, QoS 1;",
		sparkplug.Namespace, plantGroup, plantEdge)
	d.out.plain("                   its NBIRTH carries bdSeq and names %s (each interval's energy, alias 1) and %s", energyMetric, statusMetric)
	d.out.plain("                   (alias 2); NDATA sends %s by alias only; seq counts 0–255 and wraps", energyMetric)
	d.out.plain("  route            kind sparkplug on %s: add {kwh: metrics.%s} to meter/{topic[3]};", d.story.filter, energyMetric)
	d.out.plain("                   its source (group, edge), epoch (the session's bdSeq) and sequence (seq, unwrapped)")
	d.out.plain("                   are Sparkplug's own, implied")
	d.out.plain("  naive consumer   a Sparkplug host too: it resolves the aliases of the last NBIRTH and bills every delivery")
}

// plantRestarted tells what the checkpoint's restart did to the edge node.
func plantRestarted(d *demo) {
	d.out.more("the restart also ended %s's MQTT connection, and with it its Sparkplug session %d", plantEdge, plantBdSeq)
}

// plantReplayed tells what the standby's resend cost the naive consumer's
// bill, and where replayguard placed it.
func plantReplayed(d *demo, naive counts) {
	entity := "meter/" + plantEdge
	extra, err := subDecimal(d.naive.picture()[entity]["kwh"], d.guard.picture()[entity]["kwh"])
	if err != nil {
		extra = "?"
	}
	d.out.more("the naive consumer billed %s kWh more: session %d's readings, a second time", extra, plantBdSeq)
	d.out.more("replayguard placed them by their birth: session %d's NBIRTH and window, kept though session %d is current", plantBdSeq, plantBdSeq+1)
}

// plantNotice shows the edge node's session as `replayguard sources` does,
// and what the story shows of Sparkplug.
func plantNotice(d *demo, res *result) {
	src := plantSource(res.sources)
	if src == nil || src.Sparkplug == nil {
		d.out.plain("  sources:        no session for %s/%s", plantGroup, plantEdge)
		return
	}
	state := "offline"
	if src.Sparkplug.Online {
		state = "online"
	}
	older := make([]string, 0, len(src.Older))
	for _, o := range src.Older {
		older = append(older, fmt.Sprintf("session %s high %d", o.Epoch, o.High))
	}
	d.out.plain("  sources:        %s %s, bdSeq %d; epoch %s high %d; kept: %s", strings.Join(src.Source, "/"), state,
		src.Sparkplug.BdSeq, src.Epoch, src.High, strings.Join(older, ", "))
	d.out.plain("\n  What to notice:")
	d.out.plain("    bdSeq is the epoch: each NBIRTH opened a session (%d, %d, %d), and the standby's replays of session %d",
		plantBdSeq, plantBdSeq+1, plantBdSeq+2, plantBdSeq)
	d.out.plain("      met session %d's own window, while session %d was current: duplicates, not new readings", plantBdSeq, plantBdSeq+1)
	d.out.plain("    seq is unwrapped: session %d's seq went 255 → 0 → %d, and replayguard numbered on to %d, so its",
		plantBdSeq+1, liveReadings%256, liveReadings)
	d.out.plain("      window still tells the readings before the wrap from those after it")
	d.out.plain("    aliases: NDATA names %s by alias 1 only; replayguard reads it with the tables of the message's own birth",
		energyMetric)
}

// plantSource is the edge node's source report.
func plantSource(reps []engine.SourceReport) *engine.SourceReport {
	i := slices.IndexFunc(reps, func(r engine.SourceReport) bool {
		return slices.Equal(r.Source, []string{plantGroup, plantEdge})
	})
	if i < 0 {
		return nil
	}
	return &reps[i]
}
