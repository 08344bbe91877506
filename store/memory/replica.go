package memory

import (
	"maps"
	"slices"

	"github.com/replayguard/replayguard/engine"
)

// Checkpoint is a Group's state at one moment: what a replica holds that
// stopped receiving from its primary then. Take one with Checkpoint and
// promote it with FailOver.
type Checkpoint struct {
	keys       map[engine.Hash]engine.KeyEntry
	sources    map[string]engine.SourceState
	entities   map[string]engine.EntityState
	chains     map[string]chain
	quarantine map[uint64]engine.QuarantineEntry
	numbers    map[string]uint64
	outboxes   map[string]*outbox
	cursors    map[chainSink]uint64
	routes     map[string][]byte
}

// Checkpoint copies the group's state as it is now.
func (g *Group) Checkpoint() *Checkpoint {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := &Checkpoint{keys: maps.Clone(g.keys), sources: map[string]engine.SourceState{}, entities: map[string]engine.EntityState{},
		chains: map[string]chain{}, quarantine: maps.Clone(g.quarantine), numbers: maps.Clone(g.numbers), outboxes: map[string]*outbox{},
		cursors: maps.Clone(g.cursors), routes: maps.Clone(g.routes)}
	for id, s := range g.sources {
		c.sources[id] = copySource(s)
	}
	for name, e := range g.entities {
		c.entities[name] = copyEntity(e)
	}
	for m, ch := range g.chains {
		c.chains[m] = chain{log: ch.log.view(), head: ch.head, base: ch.base}
	}
	for m, o := range g.outboxes {
		c.outboxes[m] = o.clone()
	}
	return c
}

// FailOver replaces the group's state with c's, the way a replica promoted
// after its primary died replaces it: every commit made after the
// checkpoint is gone. Open handles stay open, as a client that reconnects
// to the promoted server does; their leases and their outbox and chain
// claims are kept.
// It is fault injection for tests of what a store failover loses.
func (g *Group) FailOver(c *Checkpoint) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.keys, g.quarantine, g.numbers = maps.Clone(c.keys), maps.Clone(c.quarantine), maps.Clone(c.numbers)
	g.heldMu.Lock()
	g.held = rebuildHeld(g.quarantine)
	g.heldMu.Unlock()
	g.cursors, g.routes = maps.Clone(c.cursors), maps.Clone(c.routes)
	g.sources, g.entities = map[string]engine.SourceState{}, map[string]engine.EntityState{}
	for id, s := range c.sources {
		g.sources[id] = copySource(s)
	}
	for name, e := range c.entities {
		g.entities[name] = copyEntity(e)
	}
	g.chains = map[string]*chain{}
	for m, ch := range c.chains {
		g.chains[m] = &chain{log: auditLog{pages: clonePages(ch.log.pages), dropped: ch.log.dropped}, head: ch.head, base: ch.base}
	}
	g.outboxes = map[string]*outbox{}
	for m, o := range c.outboxes {
		g.outboxes[m] = o.clone()
	}
}

// clonePages copies the pages so that appends after a failover never
// write into the checkpoint's.
func clonePages(pages [][]engine.AuditRecord) [][]engine.AuditRecord {
	out := make([][]engine.AuditRecord, len(pages))
	for i, p := range pages {
		out[i] = slices.Clone(p)
	}
	return out
}

func (o *outbox) clone() *outbox {
	return &outbox{pending: maps.Clone(o.pending), order: slices.Clone(o.order), held: maps.Clone(o.held)}
}
