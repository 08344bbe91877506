package engine

import (
	"crypto/sha256"
	"encoding/hex"
)

// ChainHash returns the hash that links r to the chain: SHA-256 over the
// previous record's hash (r.Prev, hex) and the canonical JSON of r with its
// Hash field empty. Both the engine and `audit verify` use it.
func ChainHash(r AuditRecord) (Hash, error) {
	prev, err := parseHash(r.Prev)
	if err != nil {
		return Hash{}, err
	}
	return chainHash(prev, &r), nil
}

// chainHash is ChainHash with the previous hash already parsed.
func chainHash(prev Hash, r *AuditRecord) Hash {
	hash, t := r.Hash, r.Time
	r.Hash, r.Time = "", r.Time.UTC()
	var buf [640]byte
	b := append(buf[:0], prev[:]...)
	b = appendRecord(b, r)
	r.Hash, r.Time = hash, t
	return sha256.Sum256(b)
}

// Seal sets r.Prev to prev and r.Hash to the record's chain hash.
func Seal(r *AuditRecord, prev Hash) error {
	seal(r, prev, prev.String())
	return nil
}

// seal links r after prev, whose hex the caller already has (the previous
// record's Hash), and returns r's hash.
func seal(r *AuditRecord, prev Hash, prevHex string) Hash {
	r.Prev = prevHex
	h := chainHash(prev, r)
	r.Hash = h.String()
	return h
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
