package engine

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

func rowCodecSamples() ([]SourceState, []EntityState) {
	sources := []SourceState{
		{Route: "incidents", Source: []string{"fd", "e1"}, Epochs: []EpochWindow{
			{Epoch: "7", Numeric: true, Value: 7, High: 130, First: 1, Bitmap: []uint64{math.MaxUint64, 0, 1 << 63, 5}},
			{Epoch: "6", Numeric: true, Value: 6, High: 9000, First: -1, Floor: 8000, Gaps: []Range{{From: 8001, To: 8003}, {From: -5, To: math.MaxInt64}}},
		}, Seen: []string{"boot-a", "boot-b"}, Feed: "b"},
		{Route: "meters", Source: []string{}, Epochs: []EpochWindow{}},
		{Route: "", Source: nil, Epochs: nil},
		{Route: "plant", Source: []string{"g1", "edge\x00é"}, Epochs: []EpochWindow{{Epoch: "5.1", High: -1}},
			Sparkplug: &SparkplugState{BdSeq: 261, Online: true, Births: []SparkplugBirth{{
				Epoch: "5.1", BdSeq: 261, Rebirth: 1, Stamp: 1700000000000, Digest: Hash{1, 2, 3},
				Time: time.Date(2026, 12, 2, 13, 0, 0, 5, time.UTC), Position: 42}}}},
		{Route: "plant", Source: []string{"g1", "e2"}, Epochs: []EpochWindow{{Epoch: "7", Numeric: true, Value: 7 << 20, High: 3}},
			Sparkplug: fullSparkplugState()},
	}
	entities := []EntityState{
		{Name: "incident/7", Fields: Fields{
			{Name: "active", FieldValue: FieldValue{Kind: KindRaw, Str: "true"}},
			{Name: "casualties", FieldValue: FieldValue{Kind: KindNumber, Num: "3", Version: Version{Epoch: 7, Sequence: 2, Ordinal: 99, Source: math.MaxUint64}}},
			{Name: "status", FieldValue: FieldValue{Kind: KindString, Str: "available", Version: Version{Epoch: -3, Sequence: -1, Ordinal: math.MaxUint64}}},
		}},
		{Name: "meter/a", Fields: Fields{}},
		{Name: "", Fields: nil},
	}
	return sources, entities
}

// jsonRoundTrip is what the shared stores gave back before the binary rows:
// the binary rows give back the same.
func jsonRoundTrip[T any](t *testing.T, v *T) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestRowsDecodeAsTheirJSONDid(t *testing.T) {
	sources, entities := rowCodecSamples()
	for i := range sources {
		b, err := sources[i].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got SourceState
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
		if want := jsonRoundTrip(t, &sources[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("source %d: binary gives %+v, JSON gave %+v", i, got, want)
		}
	}
	for i := range entities {
		b, err := entities[i].MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got EntityState
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("entity %d: %v", i, err)
		}
		if want := jsonRoundTrip(t, &entities[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("entity %d: binary gives %+v, JSON gave %+v", i, got, want)
		}
	}
}

func TestARowKeepsTheBytesJSONWouldHaveReplaced(t *testing.T) {
	s := SourceState{Route: "r", Source: []string{"edge\xff\xfe"}}
	b, _ := s.MarshalBinary()
	var got SourceState
	if err := got.UnmarshalBinary(b); err != nil || got.Source[0] != "edge\xff\xfe" {
		t.Fatalf("got %q (%v)", got.Source, err)
	}
}

func TestRowsWrittenAsJSONAreStillRead(t *testing.T) {
	sources, entities := rowCodecSamples()
	for i := range sources {
		b, _ := json.Marshal(&sources[i])
		var got SourceState
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("source %d: %v", i, err)
		}
		if want := jsonRoundTrip(t, &sources[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("source %d: %+v, want %+v", i, got, want)
		}
	}
	for i := range entities {
		b, _ := json.Marshal(&entities[i])
		got := EntityState{Name: "left over", Fields: Fields{{Name: "x", FieldValue: FieldValue{}}}}
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("entity %d: %v", i, err)
		}
		if want := jsonRoundTrip(t, &entities[i]); !reflect.DeepEqual(got, want) {
			t.Errorf("entity %d: %+v, want %+v", i, got, want)
		}
	}
}

func TestAnEntityRowIsTheSameBytesEachTime(t *testing.T) {
	_, entities := rowCodecSamples()
	first, _ := entities[0].MarshalBinary()
	for range 20 {
		if b, _ := entities[0].MarshalBinary(); string(b) != string(first) {
			t.Fatal("the same entity encoded to different rows")
		}
	}
}

func TestACutOrForeignRowIsAnErrorNotAPanic(t *testing.T) {
	sources, entities := rowCodecSamples()
	sb, _ := sources[0].MarshalBinary()
	eb, _ := entities[0].MarshalBinary()
	spb, _ := sources[3].MarshalBinary()
	for _, row := range [][]byte{sb, eb, spb} {
		for n := range len(row) {
			var s SourceState
			var e EntityState
			if s.UnmarshalBinary(row[:n]) == nil && e.UnmarshalBinary(row[:n]) == nil {
				t.Fatalf("a row cut to %d of %d bytes decoded", n, len(row))
			}
		}
	}
	var s SourceState
	if err := s.UnmarshalBinary(append(sb, 0)); err == nil || !strings.Contains(err.Error(), "after the row") {
		t.Errorf("a row with a byte after it: %v", err)
	}
	foreign := append([]byte{rowFormat + 1}, sb[1:]...)
	if err := s.UnmarshalBinary(foreign); err == nil || !strings.Contains(err.Error(), "upgrade replayguard") {
		t.Errorf("a row of a later format: %v", err)
	}
	huge := []byte{rowFormat, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}
	if err := s.UnmarshalBinary(huge); err == nil {
		t.Error("a row claiming four billion source parts decoded")
	}
}

// TestRandomRowsDecodeAsTheirJSONDid checks windows the samples do not
// think of. The seed is printed; REPLAYGUARD_SEED replays it.
func TestRandomRowsDecodeAsTheirJSONDid(t *testing.T) {
	seed, rng := seeded(t)
	num := func() int64 { return rng.Int64() >> rng.IntN(64) * int64(1-2*rng.IntN(2)) }
	str := func() string { s := strconv.FormatInt(num(), 36); return s[:min(len(s), rng.IntN(4))] }
	for round := range 2000 {
		s := SourceState{Route: str(), Feed: str()}
		for range rng.IntN(3) {
			s.Source = append(s.Source, str())
		}
		for range rng.IntN(3) {
			w := EpochWindow{Epoch: str(), Numeric: rng.IntN(2) == 0, Value: num(), High: max(num(), -1), First: num(), Floor: num()}
			for range rng.IntN(20) { // runs of zero, all-ones and other words
				word := [...]uint64{0, math.MaxUint64, rng.Uint64()}[rng.IntN(3)]
				for range 1 + rng.IntN(3) {
					w.Bitmap = append(w.Bitmap, word)
				}
			}
			for range rng.IntN(4) {
				w.Gaps = append(w.Gaps, Range{From: num(), To: num()})
			}
			s.Epochs = append(s.Epochs, w)
		}
		e := EntityState{Name: str(), Fields: Fields{}}
		for range rng.IntN(5) {
			e.Fields.Set(str(), FieldValue{Kind: ValueKind(rng.IntN(3)), Num: str(), Str: str(),
				Version: Version{Epoch: num(), Sequence: num(), Ordinal: rng.Uint64(), Source: rng.Uint64()}})
		}
		sb, _ := s.MarshalBinary()
		eb, _ := e.MarshalBinary()
		var gs SourceState
		var ge EntityState
		if err := gs.UnmarshalBinary(sb); err != nil || !reflect.DeepEqual(gs, jsonRoundTrip(t, &s)) {
			t.Fatalf("seed %d round %d: source %+v came back %+v (%v)", seed, round, s, gs, err)
		}
		if err := ge.UnmarshalBinary(eb); err != nil || !reflect.DeepEqual(ge, jsonRoundTrip(t, &e)) {
			t.Fatalf("seed %d round %d: entity %+v came back %+v (%v)", seed, round, e, ge, err)
		}
	}
}

// FuzzRowDecode checks that any bytes decode to an error or to a row that
// encodes back to a row decoding the same.
func FuzzRowDecode(f *testing.F) {
	sources, entities := rowCodecSamples()
	for i := range sources {
		b, _ := sources[i].MarshalBinary()
		f.Add(b)
	}
	for i := range entities {
		b, _ := entities[i].MarshalBinary()
		f.Add(b)
	}
	f.Add([]byte(`{"route":"r","source":["a"],"epochs":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s SourceState
		if s.UnmarshalBinary(b) == nil {
			again, err := s.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var s2 SourceState
			if err := s2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(s, s2) {
				t.Fatalf("source %+v re-encoded came back %+v (%v)", s, s2, err)
			}
		}
		var e EntityState
		if e.UnmarshalBinary(b) == nil {
			again, _ := e.MarshalBinary()
			var e2 EntityState
			if err := e2.UnmarshalBinary(again); err != nil || !reflect.DeepEqual(e, e2) {
				t.Fatalf("entity %+v re-encoded came back %+v (%v)", e, e2, err)
			}
		}
	})
}

// Rows of format 1, written by the build before format 2 (the first two
// samples and the first entity), decode as they did.
func TestFormat1RowsDecode(t *testing.T) {
	sources, entities := rowCodecSamples()
	for i, h := range []string{
		"0109696e636964656e747303026664026531030137010e84020204ffffffffffffffff00000000000000000000000000000080050000000000000000000136010cd08c010100807d02827d867d09feffffffffffffffff010206626f6f742d6106626f6f742d62000162",
		"01066d65746572730101000000",
	} {
		row, _ := hex.DecodeString(h)
		var got SourceState
		if err := got.UnmarshalBinary(row); err != nil || !reflect.DeepEqual(got, jsonRoundTrip(t, &sources[i])) {
			t.Errorf("format 1 source %d: %+v (%v), want %+v", i, got, err, sources[i])
		}
	}
	row, _ := hex.DecodeString("010a696e636964656e742f370406616374697665020004747275650000000a63617375616c74696573000133000e046306737461747573010009617661696c61626c650501ffffffffffffffffff01")
	var got EntityState
	want := jsonRoundTrip(t, &entities[0])
	for i := range want.Fields { // format 1 rows tell no field's source
		want.Fields[i].Version.Source = 0
	}
	if err := got.UnmarshalBinary(row); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("format 1 entity: %+v (%v), want %+v", got, err, want)
	}
}

// A source that sends in order keeps a row of a few dozen bytes, not the
// sequence_span/8 of its bitmap.
func TestInOrderSourceRowIsSmall(t *testing.T) {
	const span = DefaultSequenceSpan
	for _, high := range []int64{0, 1, 63, 1000, span - 1, span, 5*span + 17, 1 << 40} {
		s := SourceState{Route: "meters", Source: []string{"meter-000123"}}
		for seq := max(0, high-span+1); seq <= high; seq++ {
			s.checkSequence(&Delivery{epoch: "1", epochNum: true, epochInt: 1, seq: seq}, span, 2, false)
		}
		row, _ := s.MarshalBinary()
		if len(row) > 48 {
			t.Errorf("high-water mark %d: a row of %d bytes", high, len(row))
		}
		var back SourceState
		if err := back.UnmarshalBinary(row); err != nil || !reflect.DeepEqual(back, s) {
			t.Errorf("high-water mark %d: came back %+v (%v)", high, back, err)
		}
	}
}

func TestBitmapRunsAreChecked(t *testing.T) {
	for name, bitmap := range map[string][]byte{
		"a run longer than the words": {4, 5<<2 | runZeros},
		"a run of no words":           {4, 0<<2 | runOnes, 4<<2 | runOnes},
		"a run of another kind":       {1, 1<<2 | 3},
		"words that are not there":    {2, 2<<2 | runWords, 1, 2, 3},
		"too many words":              binary.AppendUvarint(nil, maxBitmapWords+1),
	} {
		row := append([]byte{rowFormat, 0, 1, 2, 1, '1', 1, 2, 2, 2}, bitmap...)
		row = append(row, 0, 0, 0, 0, 0)
		var s SourceState
		if err := s.UnmarshalBinary(row); err == nil {
			t.Errorf("%s: decoded %+v", name, s)
		}
	}
}

// A row whose window has a high-water mark below -1 (no build writes one:
// sequences are not negative) is refused, as a binary row and as JSON: a
// new epoch would retire it with a negative sequence into its bitmap.
func TestARowWithAHighWaterMarkBelowMinusOneIsRefused(t *testing.T) {
	for _, high := range []int64{-2, math.MinInt64 + 64, math.MinInt64} {
		s := SourceState{Route: "r", Source: []string{"s"}, Epochs: []EpochWindow{{Epoch: "1", Numeric: true, Value: 1, High: high, First: 2, Floor: -1, Bitmap: []uint64{0, 0}}}}
		row, err := s.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		js, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		for _, stored := range [][]byte{row, js} {
			var back SourceState
			if err := back.UnmarshalBinary(stored); err == nil || !strings.Contains(err.Error(), "below -1") {
				t.Errorf("high %d, row %q: %v, want refused", high, stored, err)
			}
		}
	}
}

// Rows of format 2, as the build before runs wrote them, decide as they
// did there: a current window with its bitmap (and Floor 0, as format 2
// wrote it), a run once its gaps leave it, an older epoch.
func TestFormat2RowsDecideAsTheyDid(t *testing.T) {
	decode := func(h string) *SourceState {
		t.Helper()
		row, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		var s SourceState
		if err := s.UnmarshalBinary(row); err != nil {
			t.Fatal(err)
		}
		return &s
	}
	check := func(s *SourceState, epoch, seq int64) Outcome {
		return s.checkSequence(&Delivery{epoch: strconv.FormatInt(epoch, 10), epochNum: true, epochInt: epoch, seq: seq}, 64, 2, false).outcome
	}
	// Seen at span 64: 100-103, 105, 106, 110, and 200-259 but 230.
	a := decode("02017202016102013101028604c80101060fffffffbfffffff0003d001d001d601da01de018603000000")
	if got := a.Epochs[0].OpenGaps(); !reflect.DeepEqual(got, []Range{{104, 104}, {107, 109}, {111, 199}, {230, 230}}) {
		t.Fatalf("open gaps %v", got)
	}
	got := []Outcome{check(a, 1, 229), check(a, 1, 195), check(a, 1, 230), check(a, 1, 230)}
	for seq := int64(260); seq < 320; seq++ {
		got = append(got, check(a, 1, seq))
	}
	if w := a.Epochs[0]; w.Bitmap != nil || w.Floor != 255 {
		t.Fatalf("every sequence of the window seen at 319: bitmap %x, floor %d; want a run above 255", w.Bitmap, w.Floor)
	}
	got = append(got, check(a, 1, 256), check(a, 1, 255), check(a, 1, 104))
	want := []Outcome{Duplicate, Quarantined, AppliedLate, Duplicate}
	for range 60 {
		want = append(want, Applied)
	}
	want = append(want, Duplicate, Quarantined, Quarantined)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("source a: %v, want %v", got, want)
	}
	// Epoch 1: 5-299, older; epoch 2: 7-19, current, Floor 0.
	b := decode("0201720201620301320104260e010680ff0f0000000000000001310102d6040a00d60300000000")
	got = []Outcome{check(b, 2, 19), check(b, 2, 0), check(b, 2, 6), check(b, 2, 6), check(b, 1, 250), check(b, 1, 235), check(b, 1, 236), check(b, 1, 301), check(b, 1, 300)}
	want = []Outcome{Duplicate, AppliedLate, AppliedLate, Duplicate, Duplicate, Quarantined, Duplicate, AppliedLate, AppliedLate}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("source b: %v, want %v", got, want)
	}
}

// fullSparkplugState is a session with every field of every Sparkplug
// type set, two births sharing a table.
func fullSparkplugState() *SparkplugState {
	node := SparkplugTable{Aliases: map[uint64]string{1: "Energy", 1 << 40: "a/b c"}, Types: map[string]uint32{"Energy": 10, "a/b c": 12}}
	dev := SparkplugTable{Aliases: map[uint64]string{7: "Temp"}, Types: map[string]uint32{"Temp": 9}}
	birth := func(epoch string, bdSeq int64) SparkplugBirth {
		return SparkplugBirth{Epoch: epoch, BdSeq: bdSeq, Rebirth: 1, Stamp: 1700000000000, Digest: Hash{1, 2}, Time: time.Date(2026, 12, 2, 13, 0, 0, 5, time.UTC),
			Position: 42, HighStamp: 1700000000009, Before: 1700000000001, Held: 1700000000007, Ended: true, Death: Hash{9},
			Node: node, Devices: map[string]SparkplugDevice{"d1": {Online: true, Stamp: 1700000000002, Table: dev, Death: 1700000000003, Held: 1700000000004,
				Earlier: []SparkplugDeviceTable{{Stamp: 1700000000001, Table: node, Held: 1700000000002}}}, "d 2/é": {Table: SparkplugTable{}}},
			High: 300, RetiredAt: time.Date(2026, 12, 2, 14, 0, 0, 0, time.UTC)}
	}
	return &SparkplugState{BdSeq: 263, Online: true, Births: []SparkplugBirth{birth("7.1", 263)}, Retired: []SparkplugBirth{birth("6", 262)},
		Deaths: []SparkplugDeath{{BdSeq: 264, Digest: Hash{4}}}, Forgot: 5, Recorded: true, Unrecorded: 6}
}

// TestTheSparkplugSampleSetsEveryField keeps the row sample complete: a
// field added to a Sparkplug type must be set in it, so that
// TestRowsDecodeAsTheirJSONDid checks that its row keeps it.
func TestTheSparkplugSampleSetsEveryField(t *testing.T) {
	var check func(path string, v reflect.Value)
	check = func(path string, v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			check(path, v.Elem())
		case reflect.Struct:
			if v.Type() == reflect.TypeFor[time.Time]() {
				if v.Interface().(time.Time).IsZero() {
					t.Errorf("%s is not set", path)
				}
				return
			}
			for i := range v.NumField() {
				f := v.Field(i)
				if f.IsZero() {
					t.Errorf("%s.%s is not set", path, v.Type().Field(i).Name)
				}
				check(path+"."+v.Type().Field(i).Name, f)
			}
		case reflect.Slice:
			for i := range v.Len() {
				check(path+"["+strconv.Itoa(i)+"]", v.Index(i))
			}
		case reflect.Map:
			if v.Type().Elem().Kind() == reflect.Struct {
				check(path+"[d1]", v.MapIndex(reflect.ValueOf("d1")))
			}
		}
	}
	check("SparkplugState", reflect.ValueOf(fullSparkplugState()))
}

// TestARowOfJSONSessionIsWrittenBackWithEachTableOnce: a row of format 4
// keeps its Sparkplug session as JSON, a table per birth, though the
// edge's births gave the same metrics. Read and written back, the row
// stores that table once.
func TestARowOfJSONSessionIsWrittenBackWithEachTableOnce(t *testing.T) {
	table := func() SparkplugTable {
		t := SparkplugTable{Aliases: map[uint64]string{}, Types: map[string]uint32{}}
		for i := range 100 {
			name := "Line 1/Meter " + strconv.Itoa(i) + "/Energy"
			t.Aliases[uint64(i+1)], t.Types[name] = name, 10
		}
		return t
	}
	src := SourceState{Route: "plant", Source: []string{"g", "e"}, Sparkplug: &SparkplugState{BdSeq: 40, Recorded: true}}
	for i := range 40 {
		src.Sparkplug.Births = append(src.Sparkplug.Births, SparkplugBirth{Epoch: strconv.Itoa(40 - i), BdSeq: int64(40 - i), Node: table(),
			Devices: map[string]SparkplugDevice{"d1": {Table: table()}}})
	}
	spb, err := json.Marshal(src.Sparkplug)
	if err != nil {
		t.Fatal(err)
	}
	// Format 4: the row of src without its session, then the JSON session.
	bare := src
	bare.Sparkplug = nil
	row, err := bare.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	row[0] = rowFormat4
	row = append(appendStr(row[:len(row)-2:len(row)-2], string(spb)), 0) // then the empty feed
	var back SourceState
	if err := back.UnmarshalBinary(row); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, jsonRoundTrip(t, &src)) {
		t.Fatalf("read %+v", back)
	}
	again, err := back.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	one := SourceState{Route: "plant", Source: []string{"g", "e"}, Sparkplug: &SparkplugState{Births: []SparkplugBirth{{Node: table()}}}}
	oneRow, _ := one.MarshalBinary()
	if most := len(oneRow) + 40*150; len(again) > most {
		t.Fatalf("written back, the row of 40 births with one table is %d bytes (the JSON one %d), over %d", len(again), len(row), most)
	}
}
