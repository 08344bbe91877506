package audit

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/replayguard/replayguard/engine"
)

// ChainVerified is what VerifyChainsWithArchive checked of one member's
// chain.
type ChainVerified struct {
	Member string
	Head   engine.AuditHead // the chain head the store keeps
	Verified
}

// VerifyChainsWithArchive verifies every member's chain of a shared store
// with its part of archive dir (ChainDir(dir, member)), each as one chain,
// as VerifyWithArchive does a single-owner store's: the member's archive
// from position 1, then its stored chain from its base (bases) up to its
// head. Members may run meanwhile, as for VerifyChains. A member directory
// in the archive whose member has no chain in the store is an error: the
// archive is not this group's. It returns what
// it verified, chain by chain, up to the first break, whose chain is the
// last.
func VerifyChainsWithArchive(ctx context.Context, dir string, s engine.ChainScanner, bases ChainBases) ([]ChainVerified, error) {
	chains, err := s.Chains(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkArchivedMembers(dir, chains); err != nil {
		return nil, err
	}
	if err := CheckStray(ctx, s); err != nil {
		return nil, err
	}
	var out []ChainVerified
	for _, c := range chains {
		v, head, err := againWhileTrimmed(ctx, s, bases, c.Member, c.Head, func(base, head engine.AuditHead) (Verified, error) {
			return verifyJoined(ctx, dir, c.Member, base, head, chainScanner{s, c.Member, head.Position})
		})
		out = append(out, ChainVerified{Member: c.Member, Head: head, Verified: v})
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// checkArchivedMembers refuses an archive that holds the chain of a member
// the store has none of.
func checkArchivedMembers(dir string, chains []engine.Chain) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("audit archive: %w", err)
	}
	known := map[string]bool{}
	for _, c := range chains {
		known[ChainDir(dir, c.Member)] = true
	}
	for _, e := range entries {
		member, ok := strings.CutPrefix(e.Name(), "member-")
		if !ok || !e.IsDir() || known[ChainDir(dir, member)] {
			continue
		}
		return &BrokenError{Position: 1, Member: member,
			Reason: fmt.Sprintf("the archive holds the chain of member %s (%s), of which the store has no chain: is the archive this group's?", member, ChainDir(dir, member))}
	}
	return nil
}
