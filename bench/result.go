package main

import (
	"fmt"
	"slices"

	"github.com/replayguard/replayguard/internal/benchfeed"
)

// result is one measurement: a rate and what the tool kept of the feed.
type result struct {
	rate  float64 // deliveries per second
	cpu   float64 // CPU seconds per delivery over the timed part; 0 when not measured
	check check
	err   string // why the measurement failed; empty when it ran
}

// check compares what a tool kept with the distinct updates of the feed it
// was given.
type check struct {
	messages int  // deliveries given to the tool
	unique   int  // distinct updates among them
	kept     int  // deliveries it kept: applied, stored or handed on
	dropped  int  // distinct updates it never kept: false drops
	twice    int  // distinct updates it kept more than once: missed duplicates
	dedup    bool // the tool is meant to drop duplicates (a no-op consumer is not)
}

// keptCheck checks a deduplicating tool that reported, for each delivery
// of msgs, whether it kept it.
func keptCheck(msgs []benchfeed.Message, kept []bool) check {
	c := check{messages: len(msgs), dedup: true}
	times := make(map[int]int, len(msgs))
	for i := range msgs {
		if !msgs[i].Replay {
			c.unique++
		}
		if kept[i] {
			c.kept++
			times[msgs[i].Unique]++
		} else if _, seen := times[msgs[i].Unique]; !seen {
			times[msgs[i].Unique] = 0
		}
	}
	for _, n := range times {
		switch {
		case n == 0:
			c.dropped++
		case n > 1:
			c.twice++
		}
	}
	return c
}

// countCheck checks a deduplicating tool from its totals only: it kept
// kept of messages deliveries carrying unique distinct updates.
func countCheck(messages, unique, kept int) check {
	c := check{messages: messages, unique: unique, kept: kept, dedup: true}
	if kept < unique {
		c.dropped = unique - kept
	} else {
		c.twice = kept - unique
	}
	return c
}

func (c check) ok() bool {
	if !c.dedup {
		return c.kept == c.messages
	}
	return c.kept == c.unique && c.dropped == 0 && c.twice == 0
}

func (c check) String() string {
	switch {
	case !c.dedup && c.ok():
		return fmt.Sprintf("ok: all %s delivered (no dedup)", count(c.messages))
	case !c.dedup:
		return fmt.Sprintf("**WRONG**: %s of %s delivered", count(c.kept), count(c.messages))
	case c.ok():
		return fmt.Sprintf("ok: kept %s unique, dropped %s replays", count(c.kept), count(c.messages-c.kept))
	}
	s := fmt.Sprintf("**WRONG**: kept %s of %s unique", count(c.kept), count(c.unique))
	if c.dropped > 0 {
		s += fmt.Sprintf(", **%s unique wrongly dropped**", count(c.dropped))
	}
	if c.twice > 0 {
		s += fmt.Sprintf(", %s kept twice", count(c.twice))
	}
	return s
}

// summary is the medians of a side's rounds.
type summary struct {
	median, lo, hi float64
	cpu            float64 // median CPU seconds per delivery; 0 when not measured
	check          check   // the first wrong check, else the last one
	err            string  // the first failure, if every round failed
	rounds, failed int
}

func summarize(rs []result) summary {
	var s summary
	var rates, cpus []float64
	for _, r := range rs {
		s.rounds++
		if r.err != "" {
			s.failed++
			if s.err == "" {
				s.err = r.err
			}
			continue
		}
		rates = append(rates, r.rate)
		if r.cpu > 0 {
			cpus = append(cpus, r.cpu)
		}
		if s.check.messages == 0 || s.check.ok() {
			s.check = r.check
		}
	}
	if len(rates) > 0 {
		slices.Sort(rates)
		s.median, s.lo, s.hi = median(rates), rates[0], rates[len(rates)-1]
	}
	if len(cpus) > 0 && len(cpus) == len(rates) {
		slices.Sort(cpus)
		s.cpu = median(cpus)
	}
	return s
}

// median is the median of sorted xs: the middle one, or the mean of the
// two middle ones of an even count.
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// count renders n with thousands separators.
func count(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
