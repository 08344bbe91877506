package engine

import "crypto/sha256"

// ChainHash returns the hash that links r to the chain: SHA-256 over the
// previous record's hash (r.Prev, 32 bytes) and the canonical JSON of r
// with its hash field the empty string. Both the engine and `audit verify`
// use it. The error is always nil; it stays for callers written when the
// hashes were text.
func ChainHash(r AuditRecord) (Hash, error) {
	return chainHash(&r), nil
}

func chainHash(r *AuditRecord) Hash {
	t := r.Time
	r.Time = r.Time.UTC()
	var buf [2048]byte // a record with a long source and effects passes 640 bytes
	b := append(buf[:0], r.Prev[:]...)
	b = appendRecord(b, r, true)
	r.Time = t
	return sha256.Sum256(b)
}

// Seal sets r.Prev to prev and r.Hash to the record's chain hash.
func Seal(r *AuditRecord, prev Hash) error {
	seal(r, prev)
	return nil
}

// seal links r after prev and returns r's hash.
func seal(r *AuditRecord, prev Hash) Hash {
	r.Prev = prev
	r.Hash = chainHash(r)
	return r.Hash
}
