package audit

import "fmt"

// Missing says where positions from..to of a chain, which neither the
// archive nor the store gave, should have been, by the store's base (the
// last position audit retention moved out of the store): those at or
// below it in the archive, those above it in the store, which never moved
// them. given says whether an archive was read, archive its directory
// ("": not known). known is false when the store's base was not read: then
// neither is named.
func Missing(from, to, base uint64, known bool, archive string, given bool) string {
	if !known {
		return fmt.Sprintf("%s %s in neither the archive nor the store (audit verify names where)", span(from, to), are(from, to))
	}
	stored := func(from, to uint64) string {
		why := fmt.Sprintf("%s the store's base, position %d, the last audit retention moved to the archive", follow(from, to), base)
		if base == 0 {
			why = "audit retention never moved a record of the chain out of the store"
		}
		return fmt.Sprintf("%s %s missing from the store: %s; the store lost %s (records removed from it, or a store restored from an older copy)",
			span(from, to), are(from, to), why, them(from, to))
	}
	archived := func(from, to uint64) string {
		if !given {
			return fmt.Sprintf("%s %s not in the store: audit retention moved %s to the archive (the store's base is position %d); give the archive (--archive DIR, or audit.archive in the configuration)",
				span(from, to), are(from, to), them(from, to), base)
		}
		if archive != "" {
			archive = " " + archive
		}
		return fmt.Sprintf("%s %s missing from the archive%s: audit retention moved %s out of the store (its base is position %d); audit verify --archive names the missing segment",
			span(from, to), are(from, to), archive, them(from, to), base)
	}
	switch {
	case from > base:
		return stored(from, to)
	case to <= base:
		return archived(from, to)
	}
	return archived(from, base) + "; and " + stored(base+1, to)
}

// span names positions from..to.
func span(from, to uint64) string {
	if from == to {
		return fmt.Sprintf("position %d", from)
	}
	return fmt.Sprintf("positions %d..%d", from, to)
}

func are(from, to uint64) string {
	if from == to {
		return "is"
	}
	return "are"
}

func them(from, to uint64) string {
	if from == to {
		return "it"
	}
	return "them"
}

func follow(from, to uint64) string {
	if from == to {
		return "it follows"
	}
	return "they follow"
}
