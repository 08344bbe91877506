package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// KeyDerivation is what, besides its name, a route derives its messages'
// idempotency keys and source identities from: its kind and the paths of
// its source parts (in order), sequence, epoch and id. Its effects, topic
// filter and windows are not part of it. A store records each route's
// derivation the first time an engine opens it (RouteRecorder), and New
// refuses a route whose recorded one differs.
type KeyDerivation struct {
	Kind     string   `json:"kind"`
	Source   []string `json:"source,omitempty"`
	Sequence string   `json:"sequence,omitempty"`
	Epoch    string   `json:"epoch,omitempty"`
	ID       string   `json:"id,omitempty"`
}

// RouteRecorder keeps each route's key derivation in a store, by route
// name, for good: a recorded derivation is never replaced nor removed, so
// every engine that opened a route decided it with the derivation recorded
// first. It is safe for concurrent use, also by the members of a group.
type RouteRecorder interface {
	// RecordRoutes records, durably, the derivation want gives each route
	// the store holds none for, and returns the one the store holds for
	// each route of want afterwards: want's own, or the one recorded
	// before (by this process or another, maybe at the same moment).
	// Routes want does not name are left alone. The values are opaque to
	// the store.
	RecordRoutes(ctx context.Context, want map[string][]byte) (map[string][]byte, error)
}

// derivation is the route's key derivation, its paths in canonical form.
func (c *route) derivation() KeyDerivation {
	d := KeyDerivation{Kind: c.kind.Kind(), Sequence: canonicalPath(c.Sequence),
		Epoch: canonicalPath(c.Epoch), ID: canonicalPath(c.ID)}
	for _, p := range c.Source {
		d.Source = append(d.Source, canonicalPath(p))
	}
	return d
}

// canonicalPath writes a topic level reference one way ("topic[01]" is
// "topic[1]"); a payload path stays as it is.
func canonicalPath(p string) string {
	if rest, ok := strings.CutPrefix(p, "topic["); ok {
		if n, err := strconv.Atoi(strings.TrimSuffix(rest, "]")); err == nil && n >= 0 {
			return "topic[" + strconv.Itoa(n) + "]"
		}
	}
	return p
}

// Encode is the derivation as a store records it: canonical JSON.
func (d KeyDerivation) Encode() []byte {
	b, err := json.Marshal(d)
	if err != nil {
		panic(err) // strings only: never
	}
	return b
}

// DecodeKeyDerivation reads a derivation Encode wrote.
func DecodeKeyDerivation(b []byte) (KeyDerivation, error) {
	var d KeyDerivation
	if err := json.Unmarshal(b, &d); err != nil || d.Kind == "" {
		return KeyDerivation{}, fmt.Errorf("a recorded key derivation %q is not one", b)
	}
	return d, nil
}

// Changes lists, in configuration terms, each setting of now that differs
// from d: none when a replay gets the same key under both.
func (d KeyDerivation) Changes(now KeyDerivation) []string {
	var out []string
	if d.Kind != now.Kind {
		out = append(out, fmt.Sprintf("kind was %s, now %s", d.Kind, now.Kind))
	}
	if !slices.Equal(d.Source, now.Source) {
		out = append(out, fmt.Sprintf("source was %s, now %s", pathList(d.Source), pathList(now.Source)))
	}
	for _, f := range []struct{ name, was, now string }{
		{"sequence", d.Sequence, now.Sequence}, {"epoch", d.Epoch, now.Epoch}, {"id", d.ID, now.ID},
	} {
		if f.was != f.now {
			out = append(out, fmt.Sprintf("%s was %s, now %s", f.name, orNone(f.was), orNone(f.now)))
		}
	}
	return out
}

func pathList(ps []string) string {
	if len(ps) == 0 {
		return "none"
	}
	return "[" + strings.Join(ps, ", ") + "]"
}

func orNone(p string) string {
	if p == "" {
		return "none"
	}
	return p
}

// checkDerivations records the routes' key derivations in the store the
// first time, and refuses the routes whose recorded one differs, naming
// what changed and how to go on. A store that records none (rec nil) is
// not checked.
func checkDerivations(ctx context.Context, rec RouteRecorder, routes []*route) error {
	if rec == nil || len(routes) == 0 {
		return nil
	}
	want := make(map[string][]byte, len(routes))
	now := make(map[string]KeyDerivation, len(routes))
	for _, r := range routes {
		now[r.Name] = r.derivation()
		want[r.Name] = now[r.Name].Encode()
	}
	got, err := rec.RecordRoutes(ctx, want)
	if err != nil {
		return fmt.Errorf("record the routes' key derivations: %w", err)
	}
	var refused []string
	for _, name := range slices.Sorted(maps.Keys(now)) {
		b, ok := got[name]
		if !ok {
			return fmt.Errorf("record the routes' key derivations: the store returned none for route %q", name)
		}
		was, err := DecodeKeyDerivation(b)
		if err != nil {
			return fmt.Errorf("route %q: %w", name, err)
		}
		if ch := was.Changes(now[name]); len(ch) > 0 {
			refused = append(refused, fmt.Sprintf("route %q: %s", name, strings.Join(ch, "; ")))
		}
	}
	if len(refused) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s. The store holds keys and source windows derived the recorded way: "+
		"a replay of a message already applied would get another key and be applied again. "+
		"Restore the recorded settings (every member of a group decides a route the same way), "+
		"or give the route a new name, which starts fresh keys and windows: "+
		"replays of what it applied under the old name are then no longer caught",
		ErrKeyDerivation, strings.Join(refused, "; "))
}

// RouteRecords reads the key derivations a store records, recording none:
// what a check that must not write (lint) compares a configuration with.
// A store that records derivations (RouteRecorder) and can be opened
// without writing implements it. Safe for concurrent use.
type RouteRecords interface {
	// RecordedRoutes returns the derivation recorded for each of names
	// that has one; a name without one is left out.
	RecordedRoutes(ctx context.Context, names []string) (map[string][]byte, error)
}

// CheckKeyDerivations compares the key derivation of each route of opts
// (compiled with opts.Kinds) with the one store records for it, writing
// nothing, and returns what changed for each route whose recorded one
// differs, by name: the routes New would refuse on store. A route the store
// records none for is not in it (New would record it). ok is false, with
// nothing checked, when store cannot read its records without writing.
func CheckKeyDerivations(ctx context.Context, store Store, opts Options) (changed map[string][]string, ok bool, err error) {
	rr, ok := store.(RouteRecords)
	if !ok {
		return nil, false, nil
	}
	kinds, err := kindsOf(opts.Kinds)
	if err != nil {
		return nil, true, err
	}
	now := make(map[string]KeyDerivation, len(opts.Routes))
	for _, r := range opts.Routes {
		c, err := compileRoute(r, kinds, store.Capabilities().Shared != nil)
		if err != nil {
			return nil, true, err
		}
		now[r.Name] = c.derivation()
	}
	got, err := rr.RecordedRoutes(ctx, slices.Sorted(maps.Keys(now)))
	if err != nil {
		return nil, true, fmt.Errorf("read the routes' recorded key derivations: %w", err)
	}
	changed = map[string][]string{}
	for name, b := range got {
		was, err := DecodeKeyDerivation(b)
		if err != nil {
			return nil, true, fmt.Errorf("route %q: %w", name, err)
		}
		if ch := was.Changes(now[name]); len(ch) > 0 {
			changed[name] = ch
		}
	}
	return changed, true, nil
}
