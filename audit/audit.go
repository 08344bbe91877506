package audit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/replayguard/replayguard/engine"
)

// ErrBroken is matched by every BrokenError.
var ErrBroken = errors.New("audit chain broken")

// BrokenError says where the chain first fails and why.
type BrokenError struct {
	Position uint64 // the first record that does not verify (its expected position for a hole)
	Reason   string
}

func (e *BrokenError) Error() string {
	return fmt.Sprintf("audit chain broken at position %d: %s", e.Position, e.Reason)
}

// Is makes errors.Is(err, ErrBroken) true.
func (e *BrokenError) Is(target error) bool { return target == ErrBroken }

// Verifier checks records one at a time, in order.
type Verifier struct {
	next uint64
	prev engine.Hash
}

// NewVerifier starts a chain at position 1.
func NewVerifier() *Verifier { return &Verifier{next: 1} }

// Check verifies the next record.
func (v *Verifier) Check(r engine.AuditRecord) error {
	switch {
	case r.Position != v.next:
		return &BrokenError{Position: v.next, Reason: fmt.Sprintf("found position %d where %d should be (a record removed or reordered)", r.Position, v.next)}
	case r.Prev != v.prev:
		return &BrokenError{Position: r.Position, Reason: "prev does not match the previous record's hash"}
	}
	h, err := engine.ChainHash(r)
	if err != nil {
		return &BrokenError{Position: r.Position, Reason: err.Error()}
	}
	if h != r.Hash {
		return &BrokenError{Position: r.Position, Reason: "hash does not match the record's content (altered)"}
	}
	v.next++
	v.prev = h
	return nil
}

// Count is the number of records verified so far.
func (v *Verifier) Count() uint64 { return v.next - 1 }

// Head is the last verified link.
func (v *Verifier) Head() engine.AuditHead {
	return engine.AuditHead{Position: v.next - 1, Hash: v.prev}
}

// Verify walks the store's whole log. When head is not zero (the chain head
// the store keeps apart from the records) the last record must match it, so
// a removed tail is caught too. It returns the number of records checked.
func Verify(ctx context.Context, s engine.AuditScanner, head engine.AuditHead) (uint64, error) {
	v := NewVerifier()
	if err := s.ScanAudit(ctx, 1, v.Check); err != nil {
		return v.Count(), err
	}
	if head.Position != 0 && v.Head() != head {
		return v.Count(), &BrokenError{Position: v.Count() + 1,
			Reason: fmt.Sprintf("log ends at position %d but the chain head is at %d", v.Count(), head.Position)}
	}
	return v.Count(), nil
}

// VerifyJSONL verifies an exported log.
func VerifyJSONL(r io.Reader) (uint64, error) {
	v := NewVerifier()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		var rec engine.AuditRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return v.Count(), &BrokenError{Position: v.Count() + 1, Reason: fmt.Sprintf("line %d is not an audit record: %v", line, err)}
		}
		if err := v.Check(rec); err != nil {
			return v.Count(), err
		}
	}
	return v.Count(), sc.Err()
}

// Export writes the records with position >= from as JSON Lines.
func Export(ctx context.Context, s engine.AuditScanner, from uint64, w io.Writer) (uint64, error) {
	bw := bufio.NewWriter(w)
	var line []byte
	n := uint64(0)
	err := s.ScanAudit(ctx, from, func(r engine.AuditRecord) error {
		n++
		var err error
		if line, err = engine.AppendRecordJSON(line[:0], &r); err != nil { // what json.Encoder writes
			return err
		}
		_, err = bw.Write(append(line, '\n'))
		return err
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}
