package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Fields are an entity's projected fields, in name order, each name once.
// A list rather than a map: an entity has a few fields, and a fleet's batch
// hands thousands of new entities to the stores and observers. Its JSON
// form is an object by field name, as a map's was.
type Fields []Field

// Field is one named field of an entity.
type Field struct {
	Name string
	FieldValue
}

// Get returns the field called name, or the zero value when there is none.
func (fs Fields) Get(name string) FieldValue {
	v, _ := fs.Lookup(name)
	return v
}

// Lookup returns the field called name and whether there is one.
func (fs Fields) Lookup(name string) (FieldValue, bool) {
	for i := range fs {
		if fs[i].Name == name {
			return fs[i].FieldValue, true
		}
	}
	return FieldValue{}, false
}

// Set sets the field called name to v, adding it in its place by name when
// there is none.
func (fs *Fields) Set(name string, v FieldValue) {
	i, found := slices.BinarySearchFunc(*fs, name, func(f Field, name string) int { return strings.Compare(f.Name, name) })
	if found && fs.sorted() {
		(*fs)[i].FieldValue = v
		return
	}
	for j := range *fs { // a list built out of order: found by a scan
		if (*fs)[j].Name == name {
			(*fs)[j].FieldValue = v
			return
		}
	}
	if !fs.sorted() {
		*fs = append(*fs, Field{Name: name, FieldValue: v})
		return
	}
	*fs = slices.Insert(*fs, i, Field{Name: name, FieldValue: v})
}

// sorted reports whether the fields are in name order.
func (fs Fields) sorted() bool {
	for i := 1; i < len(fs); i++ {
		if fs[i-1].Name >= fs[i].Name {
			return false
		}
	}
	return true
}

// MarshalJSON writes the fields as an object by name (null when nil).
func (fs Fields) MarshalJSON() ([]byte, error) {
	if fs == nil {
		return []byte("null"), nil
	}
	m := make(map[string]FieldValue, len(fs))
	for _, f := range fs {
		m[f.Name] = f.FieldValue
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads an object by name into fields in name order.
func (fs *Fields) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*fs = nil
		return nil
	}
	var m map[string]FieldValue
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("entity fields: %w", err)
	}
	out := make(Fields, 0, len(m))
	for name, v := range m {
		out = append(out, Field{Name: name, FieldValue: v})
	}
	slices.SortFunc(out, func(a, b Field) int { return strings.Compare(a.Name, b.Name) })
	*fs = out
	return nil
}
