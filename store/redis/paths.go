package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.SharePaths = (*Store)(nil)

// pathRecord is the record of a share on a path in the member's
// sharepaths hash: the group, the lease holder that recorded it, the
// client id, the brokers and the filters, one a line, the lists as JSON.
// The scripts read the group (the first line) and compare the rest whole.
func pathRecord(holder string, p engine.SharePath) (string, error) {
	brokers, err := json.Marshal(nonNil(p.Brokers))
	if err != nil {
		return "", err
	}
	filters, err := json.Marshal(nonNil(p.Filters))
	if err != nil {
		return "", err
	}
	return strings.Join([]string{p.Group, holder, p.ClientID, string(brokers), string(filters)}, "\n"), nil
}

// parsePathRecord reads a pathRecord into the adoption of member's session
// on path.
func parsePathRecord(member, path, rec string) (engine.Adoption, error) {
	parts := strings.SplitN(rec, "\n", 5)
	if len(parts) != 5 {
		return engine.Adoption{}, fmt.Errorf("the share of member %q on path %q is %q, not five lines", member, path, rec)
	}
	a := engine.Adoption{Member: member, Group: parts[0], Holder: parts[1], ClientID: parts[2], Path: path}
	if err := json.Unmarshal([]byte(parts[3]), &a.Brokers); err != nil {
		return a, fmt.Errorf("the brokers of member %q's share on path %q: %w", member, path, err)
	}
	if err := json.Unmarshal([]byte(parts[4]), &a.Filters); err != nil {
		return a, fmt.Errorf("the filters of member %q's share on path %q: %w", member, path, err)
	}
	return a, nil
}

func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// JoinSharePath records in the member's sharepaths hash that it holds
// p.Group's subscription on path p.Path, on the session of p.ClientID;
// taking the lease clears the hash. The handle keeps the record, and each
// renewal of the lease records it again if the hash lost it (a server
// without persistence, restarted), until the member quits the path. Also
// when the write failed: a renewal records it once the server answers.
func (s *Store) JoinSharePath(ctx context.Context, p engine.SharePath) error {
	if err := s.writer("join a share group on a path"); err != nil {
		return err
	}
	rec, err := pathRecord(s.holder, p)
	if err != nil {
		return fmt.Errorf("redis store: member %q joins share group %q on path %q: %w", s.member, p.Group, p.Path, err)
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	if s.paths == nil {
		s.paths = map[string]string{}
	}
	s.paths[p.Path] = rec
	if err := joinPathScript.Run(ctx, s.c, []string{s.k.sharePaths(s.member), s.k.sharePathsLost(s.member)}, p.Path, rec).Err(); err != nil {
		return s.fail("join a share group on path "+p.Path, err)
	}
	return nil
}

// QuitSharePath marks the member's share of path lost when it is group's
// (quitPathScript); renewals record it no more.
func (s *Store) QuitSharePath(ctx context.Context, path, group string) error {
	if err := s.writer("quit a share group on a path"); err != nil {
		return err
	}
	s.shareMu.Lock()
	defer s.shareMu.Unlock()
	if rec, ok := s.paths[path]; ok && strings.HasPrefix(rec, group+"\n") {
		delete(s.paths, path)
	}
	if err := quitPathScript.Run(ctx, s.c, []string{s.k.sharePaths(s.member), s.k.sharePathsLost(s.member)}, path, group).Err(); err != nil {
		return s.fail("quit a share group on path "+path, err)
	}
	return nil
}

// PathAdopter returns the adoption of the members' sessions on path.
func (s *Store) PathAdopter(path string) engine.ShareAdopter { return &pathAdopter{s: s, path: path} }

// pathAdopter is the engine.ShareAdopter of the members' sessions on one
// path.
type pathAdopter struct {
	s    *Store
	path string
}

// ClaimAdoptions takes or renews this handle's claims of the sessions on
// the path of the gone members that hold group's subscription there
// (pathClaimScript): a member whose lease ran out or was given up, or
// whose lease or claim is held by a process on this host that has died,
// or whose share there has been marked lost for at least lost.
func (a *pathAdopter) ClaimAdoptions(ctx context.Context, group string, lost time.Duration) ([]engine.Adoption, error) {
	s := a.s
	if err := s.writer("claim share sessions on a path"); err != nil {
		return nil, err
	}
	s.shareMu.Lock()
	if s.adoptPaths == nil {
		s.adoptPaths = map[string]bool{}
	}
	s.adoptPaths[a.path] = true
	s.shareMu.Unlock()
	members, err := s.members(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, 2*len(members))
	for _, m := range members {
		names = append(names, s.k.lease(m), s.k.sharePathClaim(a.path, m))
	}
	dead, err := s.deadOf(ctx, names)
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, 4*len(members))
	args := []any{s.holder, s.opts.LeaseTTL.Milliseconds(), s.member, group, strings.Join(dead, "\n"), a.path, max(0, lost.Milliseconds())}
	for _, m := range members {
		keys = append(keys, s.k.lease(m), s.k.sharePaths(m), s.k.sharePathClaim(a.path, m), s.k.sharePathsLost(m))
		args = append(args, m)
	}
	res, err := pathClaimScript.Run(ctx, s.c, keys, args...).StringSlice()
	if err != nil {
		return nil, s.fail("claim share sessions on path "+a.path, err)
	}
	var out []engine.Adoption
	for i := 0; i+2 < len(res); i += 3 {
		ad, err := parsePathRecord(res[i], a.path, res[i+1])
		if err == nil {
			ad.Lost, err = lostAt(res[i+2])
		}
		if err != nil {
			return out, fmt.Errorf("redis store: claim share sessions on path %q: %w", a.path, err)
		}
		out = append(out, ad)
	}
	return out, nil
}

// ShareAdopted removes ad's member's share of the path while this handle
// holds its claim there and the share is still ad's (pathAdoptedScript).
func (a *pathAdopter) ShareAdopted(ctx context.Context, ad engine.Adoption) (bool, error) {
	s := a.s
	if err := s.writer("record a share session adopted"); err != nil {
		return false, err
	}
	head := ad.Group + "\n" + ad.Holder + "\n" + ad.ClientID + "\n"
	n, err := pathAdoptedScript.Run(ctx, s.c, []string{s.k.sharePaths(ad.Member), s.k.sharePathClaim(a.path, ad.Member), s.k.sharePathsLost(ad.Member)},
		s.holder, a.path, head, lostArg(ad.Lost)).Int()
	if err != nil {
		return false, s.fail(fmt.Sprintf("record the share session of %q on path %q adopted", ad.Member, a.path), err)
	}
	return n == 1, nil
}

// ReleaseAdoption gives up this handle's claim of member's session on the
// path.
func (a *pathAdopter) ReleaseAdoption(ctx context.Context, member string) error {
	s := a.s
	if err := s.writer("release a share session"); err != nil {
		return err
	}
	if err := releaseScript.Run(ctx, s.c, []string{s.k.sharePathClaim(a.path, member)}, s.holder).Err(); err != nil {
		return s.fail("release the share session claim of "+member+" on path "+a.path, err)
	}
	return nil
}

// releasePathAdoptions gives up every path claim of this handle, for
// Close: those of the paths it claimed sessions on.
func (s *Store) releasePathAdoptions(ctx context.Context, p goredis.Pipeliner, members []string) {
	s.shareMu.Lock()
	paths := make([]string, 0, len(s.adoptPaths))
	for path := range s.adoptPaths {
		paths = append(paths, path)
	}
	s.shareMu.Unlock()
	for _, path := range paths {
		for _, m := range members {
			releaseScript.Eval(ctx, p, []string{s.k.sharePathClaim(path, m)}, s.holder)
		}
	}
}
