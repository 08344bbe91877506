package engine

import (
	"fmt"
	"strings"
)

// jsonKind is the built-in route kind: a JSON payload whose identity fields
// (source, sequence or id, epoch) the route names by dotted path.
type jsonKind struct{}

// jsonReader reads one json route: the indexes of its identity paths.
type jsonReader struct {
	source   []int
	sequence int // -1 when absent
	epoch    int
	id       int
}

func (jsonKind) Kind() string { return KindJSON }

// ParsePath splits a dotted payload path.
func (jsonKind) ParsePath(p string) ([]string, error) {
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return nil, fmt.Errorf("bad payload path %q", p)
		}
	}
	return segs, nil
}

// Compile checks the route's identity fields and adds their paths.
func (jsonKind) Compile(r Route, paths *RoutePaths, _ bool) (RouteReader, error) {
	jr := &jsonReader{sequence: -1, epoch: -1, id: -1}
	if len(r.Source) == 0 {
		return nil, fmt.Errorf("source: empty")
	}
	if (r.Sequence == "") == (r.ID == "") {
		return nil, fmt.Errorf("exactly one of sequence and id must be set")
	}
	if r.Epoch != "" && r.Sequence == "" {
		return nil, fmt.Errorf("epoch needs sequence")
	}
	for _, s := range r.Source {
		i, err := paths.Ref(s)
		if err != nil {
			return nil, fmt.Errorf("source: %v", err)
		}
		jr.source = append(jr.source, i)
	}
	for _, f := range []struct {
		name, path string
		index      *int
	}{{"sequence", r.Sequence, &jr.sequence}, {"epoch", r.Epoch, &jr.epoch}, {"id", r.ID, &jr.id}} {
		if f.path == "" {
			continue
		}
		i, err := paths.Ref(f.path)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", f.name, err)
		}
		*f.index = i
	}
	return jr, nil
}
