package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/replayguard/replayguard/engine"
)

// An export is JSON Lines of records and nothing else, so that every
// export ever written verifies: it cannot say where it ends. A file cut
// short between two records verifies as a whole chain does; only the
// store can tell (FileEnd). A file cut inside a record is a LineError.

// VerifyJSONL verifies an exported log: one chain, or a group's chains
// (each record's member names its chain; each chain's records in order).
// It returns the number of records checked. See VerifyJSONLFile for where
// each chain begins and ends in the file.
func VerifyJSONL(r io.Reader) (uint64, error) {
	n, _, err := VerifyJSONLFile(r)
	return n, err
}

// VerifyJSONLChains is VerifyJSONL, and also returns the position each
// chain begins at in the export, by member.
func VerifyJSONLChains(r io.Reader) (uint64, map[string]uint64, error) {
	n, chains, err := VerifyJSONLFile(r)
	starts := make(map[string]uint64, len(chains))
	for _, c := range chains {
		starts[c.Member] = c.First
	}
	return n, starts, err
}

// FileChain is what an export vouches for of one chain: the records from
// First to Last, each linked to the one before.
type FileChain struct {
	Member string
	First  uint64           // the position of the chain's first record in the file
	Last   engine.AuditHead // its last record: where the file's part of the chain ends
}

// VerifyJSONLFile is VerifyJSONL, and also returns each chain the export
// holds, in the order of their first records. A chain that begins after
// position 1 (its store was trimmed by audit retention, or it was
// exported with a later --from) is verified from its first record, which
// links to what the file does not hold: the records before it cannot be
// verified from the file. Nor can the records after a chain's last one:
// compare that with the store's chain head (FileEnd).
func VerifyJSONLFile(r io.Reader) (uint64, []FileChain, error) {
	verifiers := map[string]*Verifier{}
	var chains []FileChain
	at := map[string]int{}
	n, err := scanJSONL(r, func(rec engine.AuditRecord) error {
		v := verifiers[rec.Member]
		if v == nil {
			v = NewChainVerifier(rec.Member)
			if rec.Position > 1 {
				v = NewVerifierFrom(engine.AuditHead{Position: rec.Position - 1, Hash: rec.Prev}, rec.Member)
			}
			verifiers[rec.Member] = v
			at[rec.Member] = len(chains)
			chains = append(chains, FileChain{Member: rec.Member, First: rec.Position})
		}
		if err := v.Check(rec); err != nil {
			return err
		}
		chains[at[rec.Member]].Last = v.Head()
		return nil
	})
	if le, ok := errors.AsType[*LineError](err); ok && n == 0 && !le.Cut {
		err = &NotExportError{Line: le.Line, Err: le.Err}
	}
	return n, chains, err
}

// NotExportError is a file whose first line holds no audit record: not
// an export cut short or altered, but some other file (a captured feed,
// another program's JSON), so there is no chain in it to call broken.
// errors.Is(err, ErrNotExport) is true.
type NotExportError struct {
	Line uint64 // the line, from 1
	Err  error  // why it holds no record
}

// ErrNotExport is matched by every NotExportError.
var ErrNotExport = errors.New("not an audit export")

func (e *NotExportError) Error() string {
	if nf, ok := errors.AsType[noFieldError](e.Err); ok {
		return fmt.Sprintf("%v: line %d has no %q", ErrNotExport, e.Line, nf.field)
	}
	return fmt.Sprintf("%v: line %d is not an audit record (%v)", ErrNotExport, e.Line, e.Err)
}

// Is makes errors.Is(err, ErrNotExport) true.
func (e *NotExportError) Is(target error) bool { return target == ErrNotExport }

func (e *NotExportError) Unwrap() error { return e.Err }

// noFieldError is a line's JSON object without a field every audit record
// has.
type noFieldError struct{ field string }

func (e noFieldError) Error() string { return fmt.Sprintf("it has no %q", e.field) }

// missingField returns the first of position and hash, which every audit
// record has and a chain needs, that line's object lacks; nil when it has
// both. Only a record that decoded without them is looked at again.
func missingField(line []byte, rec *engine.AuditRecord) error {
	if rec.Position != 0 && !rec.Hash.IsZero() {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(line, &fields) != nil {
		return nil
	}
	for _, f := range []string{"position", "hash"} {
		if _, ok := fields[f]; !ok {
			return noFieldError{f}
		}
	}
	return nil
}

// LineError is a line of an export that holds no audit record. Cut says
// the line is the file's last and has no end of line: the file was cut
// short inside a record. errors.Is(err, ErrBroken) is true.
type LineError struct {
	Line  uint64           // from 1
	Cut   bool             // the file ends inside this line's record
	After engine.AuditHead // the last record before the line, zero when none
	Err   error
}

func (e *LineError) Error() string {
	after := "before its first record"
	if e.After.Position != 0 {
		after = fmt.Sprintf("after the record at position %d", e.After.Position)
	}
	if e.Cut {
		return fmt.Sprintf("the file is cut short: its last line, %d, ends inside an audit record (%v), %s: what the record and the rest of the log held is not in the file", e.Line, e.Err, after)
	}
	return fmt.Sprintf("line %d is not an audit record (%v), %s", e.Line, e.Err, after)
}

// Is makes errors.Is(err, ErrBroken) true.
func (e *LineError) Is(target error) bool { return target == ErrBroken }

func (e *LineError) Unwrap() error { return e.Err }

// maxLine is the longest line an export may hold.
const maxLine = 16 << 20

// scanJSONL calls fn for each record of a JSON Lines log and returns how
// many fn accepted.
func scanJSONL(r io.Reader, fn func(engine.AuditRecord) error) (uint64, error) {
	n := uint64(0)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	ended := true // the line scanned last had its end of line
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		adv, tok, err := bufio.ScanLines(data, atEOF)
		if tok != nil {
			ended = data[adv-1] == '\n'
		}
		return adv, tok, err
	})
	var last engine.AuditHead
	line := uint64(1)
	for ; sc.Scan(); line++ {
		var rec engine.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			cut := !ended && !sc.Scan() && sc.Err() == nil
			return n, &LineError{Line: line, Cut: cut, After: last, Err: err}
		}
		if err := missingField(sc.Bytes(), &rec); err != nil {
			return n, &LineError{Line: line, After: last, Err: err}
		}
		if err := checkKeys(sc.Bytes()); err != nil {
			return n, &BrokenError{Position: rec.Position, Member: rec.Member, Reason: fmt.Sprintf("line %d: %v", line, err)}
		}
		if err := fn(rec); err != nil {
			return n, err
		}
		last = engine.AuditHead{Position: rec.Position, Hash: rec.Hash}
		n++
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return n, &LineError{Line: line, After: last, Err: fmt.Errorf("longer than %d MiB", maxLine>>20)}
	}
	return n, sc.Err()
}

// FileEnd compares where an export's chain ends (c) with the chain as the
// store holds it: head, and held, the hash of the store's record at a
// position (false: the store no longer holds it, retention archived it).
// It returns whether the file's last record was found to be the store's
// (false when the store no longer holds it); the caller says the store's
// records after it, which the file lacks: the export was cut short, or
// taken before they were written. A store whose head is before the file's
// end, or whose record there is another, is a break.
func FileEnd(c FileChain, head engine.AuditHead, held func(position uint64) (engine.Hash, bool, error)) (bool, error) {
	end := c.Last
	if head.Position < end.Position {
		return false, &BrokenError{Position: head.Position + 1, Member: c.Member,
			Reason: fmt.Sprintf("the file holds this chain's records up to position %d, past the chain head the store keeps (%d): the store lost records the file holds, or the file is of another store", end.Position, head.Position)}
	}
	h, ok := head.Hash, head.Position == end.Position && !head.Hash.IsZero()
	if !ok {
		var err error
		if h, ok, err = held(end.Position); err != nil || !ok {
			return false, err
		}
	}
	if h != end.Hash {
		return false, &BrokenError{Position: end.Position, Member: c.Member,
			Reason: "the file's record at this position is not the store's: the file is of another log, or one of them was altered"}
	}
	return true, nil
}
