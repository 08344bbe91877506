package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ChainHash returns the hash that links r to the chain: SHA-256 over the
// previous record's hash (r.Prev, hex) and the canonical JSON of r with its
// Hash field empty. Both the engine and `audit verify` use it.
func ChainHash(r AuditRecord) (Hash, error) {
	r.Hash = ""
	r.Time = r.Time.UTC()
	body, err := json.Marshal(r)
	if err != nil {
		return Hash{}, err
	}
	prev, err := hex.DecodeString(r.Prev)
	if err != nil || len(prev) != 32 {
		return Hash{}, errBadPrev
	}
	h := sha256.New()
	h.Write(prev)
	h.Write(body)
	var out Hash
	h.Sum(out[:0])
	return out, nil
}

// Seal sets r.Prev to prev and r.Hash to the record's chain hash.
func Seal(r *AuditRecord, prev Hash) error {
	r.Prev = prev.String()
	h, err := ChainHash(*r)
	if err != nil {
		return err
	}
	r.Hash = h.String()
	return nil
}

func parseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, errBadPrev
	}
	copy(h[:], b)
	return h, nil
}
