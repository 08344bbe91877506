package engine

import (
	"crypto/sha256"
	"encoding/binary"
)

// appendField appends a length-prefixed field: a uvarint length, then the
// bytes. Length prefixes make the encoding injective, so ("a|b","c") and
// ("a","b|c") never share a key the way a delimiter join would.
func appendField(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// sourceID is the stable, injective identity of a (route, source parts).
func sourceID(route string, parts []string) string {
	return string(appendSourceID(nil, route, parts))
}

func appendSourceID(b []byte, route string, parts []string) []byte {
	b = appendField(b, route)
	b = binary.AppendUvarint(b, uint64(len(parts)))
	for _, p := range parts {
		b = appendField(b, p)
	}
	return b
}

// sourceTag is a 64-bit hash of (route, source parts), never 0: what a
// field's Version keeps of the source that wrote it, to tell one source's
// messages from another's.
func sourceTag(route string, parts []string) uint64 {
	var buf [128]byte
	h := uint64(14695981039346656037) // FNV-1a, 64 bits
	for _, c := range appendSourceID(buf[:0], route, parts) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return max(h, 1)
}

// SourceID returns the store identity of (route, source parts).
func SourceID(route string, parts []string) string { return sourceID(route, parts) }

// key kinds, so that a sequenced and an id route can never share a key.
const (
	keySequenced = 's'
	keyByID      = 'i'
	keyDeath     = 'd'
)

// SequencedKey derives the idempotency key of a sequenced message.
func SequencedKey(route string, source []string, epoch string, seq int64) Hash {
	var buf [256]byte
	b := appendSourceID(append(buf[:0], keySequenced), route, source)
	b = appendField(b, epoch)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	return sha256.Sum256(b)
}

// IDKey derives the idempotency key of a message identified by a producer id.
func IDKey(route string, source []string, id string) Hash {
	var buf [256]byte
	b := appendSourceID(append(buf[:0], keyByID), route, source)
	b = appendField(b, id)
	return sha256.Sum256(b)
}

// EpochEndKey derives the idempotency key of a message that ends an epoch
// and carries no sequence (a Sparkplug NDEATH ends its session): (route,
// source, the epoch it ends).
func EpochEndKey(route string, source []string, epoch string) Hash {
	var buf [256]byte
	b := appendSourceID(append(buf[:0], keyDeath), route, source)
	b = appendField(b, epoch)
	return sha256.Sum256(b)
}
