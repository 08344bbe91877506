package sparkplug

import "github.com/replayguard/replayguard/engine"

// sharedTable returns a table st already keeps that equals t, or t: a
// birth that gives the aliases and datatypes an earlier one gave shares
// its table, which the edge's row then stores once (tables never change
// once made). Births are rare beside data, so the comparison is cheap
// where it counts.
func sharedTable(st *engine.SparkplugState, t engine.SparkplugTable) engine.SparkplugTable {
	if st == nil {
		return t
	}
	same := func(u engine.SparkplugTable) bool {
		return len(u.Aliases) == len(t.Aliases) && len(u.Types) == len(t.Types) && sameTable(u, t)
	}
	for _, births := range [][]engine.SparkplugBirth{st.Births, st.Retired} {
		for _, b := range births {
			if same(b.Node) {
				return b.Node
			}
			for _, d := range b.Devices {
				if same(d.Table) {
					return d.Table
				}
				for _, e := range d.Earlier {
					if same(e.Table) {
						return e.Table
					}
				}
			}
		}
	}
	return t
}
