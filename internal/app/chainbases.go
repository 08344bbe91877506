package app

import (
	"context"

	"github.com/replayguard/replayguard/audit"
	"github.com/replayguard/replayguard/engine"
)

// chainBases is where audit retention left each member's chain of st
// beginning; nil when st cannot say (nothing is trimmed then).
func chainBases(st Store) audit.ChainBases {
	if k := st.Capabilities().Keeper; k != nil {
		return k
	}
	return nil
}

// trimmedChains returns the base of every member's chain of st that audit
// retention trimmed, by member, for a report (report.Options.Bases): empty
// when none is; nil when st cannot say.
func trimmedChains(ctx context.Context, st Store) (map[string]engine.AuditHead, error) {
	caps := st.Capabilities()
	if caps.Keeper == nil || caps.Chains == nil {
		return nil, nil
	}
	chains, err := caps.Chains.Chains(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]engine.AuditHead{}
	for _, c := range chains {
		base, err := caps.Keeper.ChainBase(ctx, c.Member)
		if err != nil {
			return nil, err
		}
		if base.Position > 0 {
			out[c.Member] = base
		}
	}
	return out, nil
}
