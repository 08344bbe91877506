package engine

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestAnEntitysStateListsItsFieldsInNameOrder(t *testing.T) {
	var ent entity
	for _, name := range []string{"status", "casualties", "zone", "active"} {
		ent.add(name, field{kind: KindString, str: name})
	}
	st, _ := ent.state("incident/7", nil)
	var names []string
	for _, f := range st.Fields {
		names = append(names, f.Name)
	}
	if want := []string{"active", "casualties", "status", "zone"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("fields %v, want %v", names, want)
	}
	if got := st.Fields.Get("zone").Str; got != "zone" {
		t.Fatalf("zone = %q, want zone", got)
	}
}

func TestSetReplacesAFieldOrAddsItInNameOrder(t *testing.T) {
	var fs Fields
	fs.Set("b", FieldValue{Str: "1"})
	fs.Set("a", FieldValue{Str: "2"})
	fs.Set("c", FieldValue{Str: "3"})
	fs.Set("b", FieldValue{Str: "4"})
	want := Fields{{Name: "a", FieldValue: FieldValue{Str: "2"}}, {Name: "b", FieldValue: FieldValue{Str: "4"}},
		{Name: "c", FieldValue: FieldValue{Str: "3"}}}
	if !reflect.DeepEqual(fs, want) {
		t.Fatalf("fields %+v, want %+v", fs, want)
	}
	if _, ok := fs.Lookup("d"); ok {
		t.Fatal("Lookup found a field never set")
	}
}

func TestFieldsAreAJSONObjectByName(t *testing.T) {
	fs := Fields{{Name: "casualties", FieldValue: FieldValue{Kind: KindNumber, Num: "3"}}}
	b, err := json.Marshal(EntityState{Name: "incident/7", Fields: fs})
	if want := `{"name":"incident/7","fields":{"casualties":{"kind":0,"num":"3","version":{"e":0,"s":0,"o":0}}}}`; err != nil || string(b) != want {
		t.Fatalf("JSON %s (%v), want %s", b, err, want)
	}
	var st EntityState
	in := `{"name":"n","fields":{"z":{"kind":1,"str":"x"},"a":{"kind":0,"num":"1"}}}`
	if err := json.Unmarshal([]byte(in), &st); err != nil {
		t.Fatal(err)
	}
	want := Fields{{Name: "a", FieldValue: FieldValue{Kind: KindNumber, Num: "1"}}, {Name: "z", FieldValue: FieldValue{Kind: KindString, Str: "x"}}}
	if !reflect.DeepEqual(st.Fields, want) {
		t.Fatalf("read %+v, want %+v", st.Fields, want)
	}
	if b, _ := json.Marshal(EntityState{}); string(b) != `{"name":"","fields":null}` {
		t.Fatalf("no fields: %s, want null", b)
	}
}

func TestStatesOfOneBatchDoNotShareRoomForNewFields(t *testing.T) {
	var a, b entity
	a.add("kwh", field{kind: KindString, str: "a"})
	b.add("kwh", field{kind: KindString, str: "b"})
	slab := make(Fields, 2)
	sa, slab := a.state("meter/a", slab)
	sb, _ := b.state("meter/b", slab)
	sa.Fields.Set("zz", FieldValue{Str: "added"})
	if len(sb.Fields) != 1 || sb.Fields[0].Name != "kwh" || sb.Fields[0].Str != "b" {
		t.Fatalf("meter/b's fields %+v after meter/a's state gained one", sb.Fields)
	}
}
