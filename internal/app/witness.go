package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
)

// behindChain is a member chain the store lost commits of, and how.
type behindChain struct{ member, what string }

// witness is what a member's journal on this machine says it committed.
type witness struct {
	dir        string
	head       engine.AuditHead
	recovering bool
}

// chainsBehind compares each member's chain head in the store with its
// witness, the journal this machine keeps for it under store.journal.path
// (members without one here are not checked): a store behind it, or
// holding another record at the witness's position, lost what the member
// committed and acknowledged.
func chainsBehind(ctx context.Context, sc config.StoreConfig, cs engine.ChainScanner, keep engine.ChainBaser) ([]behindChain, error) {
	if sc.Journal.Path == "" || sc.Journal.Path == config.JournalOff {
		return nil, nil
	}
	chains, err := cs.Chains(ctx)
	if err != nil {
		return nil, err
	}
	// The witnesses first, the store's heads after them: a running member
	// commits before it journals, so a head read after its witness is
	// never behind it unless the store lost commits.
	witnesses, err := readWitnesses(sc, chains)
	if err != nil {
		return nil, err
	}
	if chains, err = cs.Chains(ctx); err != nil {
		return nil, err
	}
	var out []behindChain
	for _, c := range chains {
		w, ok := witnesses[c.Member]
		if !ok || w.head.Position == 0 {
			continue
		}
		what, err := behindWitness(ctx, cs, keep, c, w)
		if err != nil {
			return nil, err
		}
		if what != "" {
			out = append(out, behindChain{c.Member, what})
		}
	}
	return out, nil
}

// readWitnesses reads the journal of each chain's member that this
// machine keeps one for.
func readWitnesses(sc config.StoreConfig, chains []engine.Chain) (map[string]witness, error) {
	witnesses := map[string]witness{}
	for _, c := range chains {
		dir := JournalDir(sc, c.Member)
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			continue // no journal of this member on this machine
		}
		j, err := journal.Open(dir, journal.Options{ReadOnly: true})
		if errors.Is(err, fs.ErrNotExist) { // the member deleted an expired segment while it was listed: list again
			j, err = journal.Open(dir, journal.Options{ReadOnly: true})
		}
		if err != nil {
			return nil, fmt.Errorf("member %s: read its journal: %w", c.Member, err)
		}
		last, pending := j.Last()
		j.Close()
		witnesses[c.Member] = witness{dir, last.Head, pending != nil}
	}
	return witnesses, nil
}

// behindWitness says how the store's chain c lost what its witness w
// holds, or "" when it did not.
func behindWitness(ctx context.Context, cs engine.ChainScanner, keep engine.ChainBaser, c engine.Chain, w witness) (string, error) {
	switch {
	case w.recovering:
		return fmt.Sprintf("audit chain RECOVERING: the member's journal (%s) holds a recovery of what the store lost that has not finished; start the member (it resumes the recovery), or see `replayguard store loss`", w.dir), nil
	case c.Head.Position < w.head.Position:
		return fmt.Sprintf("audit chain BEHIND its witness: the store holds it up to position %d, the member's journal (%s) up to %d: positions %d..%d were committed, acknowledged and lost",
			c.Head.Position, w.dir, w.head.Position, c.Head.Position+1, w.head.Position), nil
	}
	link, archived, err := engine.ChainLink(ctx, cs, keep, c.Member, w.head.Position)
	if err != nil && !errors.Is(err, engine.ErrNoRecord) {
		return "", err
	}
	if !archived && link.Hash != w.head.Hash { // an archived one is checked by audit verify --archive
		return fmt.Sprintf("audit chain FORKED from its witness: the store holds another record at position %d than the member's journal (%s) says it committed",
			w.head.Position, w.dir), nil
	}
	return "", nil
}
