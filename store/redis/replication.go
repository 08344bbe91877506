package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Replication (DESIGN.md, "A store that fails over"): Redis replicates
// asynchronously, so a replica promoted after the primary died lacks the
// commits that had not reached it, although the broker was acknowledged
// for them. A member's store therefore refuses a primary with replicas
// unless each commit waits for them (WAIT, store.wait_replicas) or the
// operator accepts the risk (store.allow_async_replication), and refuses a
// replica. Open checks the server, and so does every new connection after
// it: a reconnect after a Sentinel failover or a restart may reach another
// server, or the same one with replicas added.

// replication is what a member's store knows of its server's replicas.
type replication struct {
	watch atomic.Bool // Open has checked the server: onConnect checks each new connection
	mu    sync.Mutex
	async string // the asynchronous replication accepted, "" when none
	short bool   // fewer replicas connected than store.wait_replicas, last seen
}

// replicationInfo is what INFO replication says of a server.
type replicationInfo struct {
	role     string // master, slave; "" when not reported (a Sentinel)
	replicas int    // connected_slaves
}

type infoer interface {
	Info(ctx context.Context, section ...string) *goredis.StringCmd
}

func readReplication(ctx context.Context, c infoer) (replicationInfo, error) {
	text, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return replicationInfo{}, err
	}
	return parseReplication(text), nil
}

func parseReplication(text string) replicationInfo {
	var info replicationInfo
	for line := range strings.Lines(text) {
		name, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch name {
		case "role":
			info.role = v
		case "connected_slaves":
			info.replicas, _ = strconv.Atoi(v)
		}
	}
	return info
}

// replicasConnected reads "1 replica is connected", "2 replicas are connected".
func replicasConnected(n int) string {
	if n == 1 {
		return "1 replica is connected"
	}
	return strconv.Itoa(n) + " replicas are connected"
}

// checkReplicationAtOpen refuses a server that is a replica, or whose
// replicas could lose a commit unnoticed, or that has fewer replicas than
// store.wait_replicas; then it has onConnect check each new connection.
func (s *Store) checkReplicationAtOpen(ctx context.Context) error {
	info, err := readReplication(ctx, s.c)
	if err != nil {
		return s.fail("read INFO replication", err)
	}
	if info.role == "" && s.opts.WaitReplicas == 0 {
		if !s.opts.AllowAsyncReplication {
			return fmt.Errorf("redis store: %s reports no replication role (INFO replication): cannot tell whether it "+
				"replicates asynchronously (set store.wait_replicas to the number of its replicas, or "+
				"store.allow_async_replication: true if it has none or to accept that a failover can lose commits)", s.url)
		}
		s.accepted(fmt.Sprintf("%s reports no replication role, and store.wait_replicas is 0 (store.allow_async_replication)", s.url))
	} else {
		async, err := s.judge(info)
		if err != nil {
			return err
		}
		if info.replicas < s.opts.WaitReplicas {
			return fmt.Errorf("redis store: store.wait_replicas is %d but %s to %s: every commit would fail "+
				"(connect the replicas, or lower store.wait_replicas)", s.opts.WaitReplicas, replicasConnected(info.replicas), s.url)
		}
		s.accepted(async)
	}
	s.repl.watch.Store(true)
	return nil
}

// judge refuses a replica, and a primary with replicas that no commit
// waits for unless that is allowed; it returns how the server replicates
// asynchronously, when allowed ("" when it does not).
func (s *Store) judge(info replicationInfo) (async string, err error) {
	n := info.replicas
	switch {
	case info.role != "master":
		return "", fmt.Errorf("redis store: %s is a replica (role:%s): point store.url at the primary or use Sentinel "+
			"(redis+sentinel://host:26379/MASTERNAME)", s.url, info.role)
	case n == 0 || s.opts.WaitReplicas > 0:
		return "", nil
	case !s.opts.AllowAsyncReplication:
		it := "it"
		if n > 1 {
			it = "them"
		}
		return "", fmt.Errorf("redis store: %s to %s and store.wait_replicas is 0: Redis replicates asynchronously, "+
			"so a write acknowledged here can be lost when a replica is promoted (set store.wait_replicas: %d to make "+
			"each commit wait for %s, or store.allow_async_replication: true to accept that; the member's journal then "+
			"recovers what a failover loses)", replicasConnected(n), s.url, n, it)
	}
	return fmt.Sprintf("%s to %s and store.wait_replicas is 0 (store.allow_async_replication): no commit waits for a "+
		"replica, so a failover can lose acknowledged commits", replicasConnected(n), s.url), nil
}

// accepted records how the server replicates asynchronously ("" when it
// does not), and warns when that changes to something.
func (s *Store) accepted(async string) {
	s.repl.mu.Lock()
	changed := async != s.repl.async
	s.repl.async = async
	s.repl.mu.Unlock()
	if !changed {
		return
	}
	s.stats.Replicating(async)
	if async != "" {
		s.log.Warn("the store replicates asynchronously, accepted by store.allow_async_replication: "+
			"a failover can lose acknowledged commits, which only the member's journal brings back",
			"url", s.url, "replication", async)
	}
}

// onConnect checks each connection the client opens after Open (INFO
// replication, one round trip): a refused server's connection is not used,
// so the command that opened it fails with the refusal. A connection with
// no replication role is a Sentinel's (its INFO has no such section).
func (s *Store) onConnect(ctx context.Context, cn *goredis.Conn) error {
	if !s.repl.watch.Load() {
		return nil // Open checks the server itself
	}
	info, err := readReplication(ctx, cn)
	if err != nil {
		return fmt.Errorf("redis store: check a new connection's INFO replication at %s: %w", s.url, err)
	}
	if info.role == "" {
		return nil
	}
	async, err := s.judge(info)
	if err != nil {
		s.stats.Noted(err)
		s.log.Error("refused a new connection to the store's server", "member", s.member, "url", s.url, "err", err)
		return refusal{err}
	}
	s.accepted(async)
	short := info.replicas < s.opts.WaitReplicas
	s.repl.mu.Lock()
	warn := short && !s.repl.short
	s.repl.short = short
	s.repl.mu.Unlock()
	if warn {
		s.log.Warn("fewer replicas are connected than store.wait_replicas: commits fail until they are back",
			"member", s.member, "url", s.url, "replicas", info.replicas, "wait_replicas", s.opts.WaitReplicas)
	}
	return nil
}

// refusal is onConnect's refusal of a server, which reaches the store's
// caller through the command that opened the connection: Store.fail
// returns it as it is, since it names the server and the setting already.
// It has no Unwrap: go-redis unwraps an OnConnect error once.
type refusal struct{ error }

// clientReadTimeout is go-redis's read timeout when store.url sets none.
const clientReadTimeout = 5 * time.Second

// readTimeout returns the client's read timeout (from store.url; 0 means
// go-redis's 5s) raised, when commits WAIT, to WaitTimeout and a second:
// the update script and its WAIT are read under one deadline.
func (s *Store) readTimeout(rt time.Duration) time.Duration {
	if s.opts.WaitReplicas == 0 || rt < 0 {
		return rt
	}
	if rt == 0 {
		rt = clientReadTimeout
	}
	return max(rt, s.opts.WaitTimeout+time.Second)
}

// runUpdate runs the update script. With store.wait_replicas, a WAIT
// follows it on the same connection, as WAIT must (it waits for the
// connection's own writes): both go in one pipeline, which go-redis writes
// to and reads from one connection (baseClient.pipelineProcessCmds). The
// script's answer comes back whatever the WAIT's; waitErr is set when the
// script wrote ("ok") and fewer replicas than store.wait_replicas
// acknowledged it.
func (s *Store) runUpdate(ctx context.Context, keys []string, args []any) (res []string, waitErr error, err error) {
	if s.opts.WaitReplicas == 0 {
		res, err = updateScript.Run(ctx, s.c, keys, args...).StringSlice()
		return res, nil, err
	}
	for range 2 {
		var script *goredis.Cmd
		var wait *goredis.Cmd
		_, err = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			script = updateScript.EvalSha(ctx, p, keys, args...)
			wait = p.Do(ctx, "WAIT", s.opts.WaitReplicas, s.opts.WaitTimeout.Milliseconds())
			return nil
		})
		if script != nil && goredis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
			if err = updateScript.Load(ctx, s.c).Err(); err == nil {
				continue // the server restarted, or failed over: load the script and write again
			}
		}
		if script == nil || script.Err() != nil {
			return nil, nil, err
		}
		if res, err = script.StringSlice(); err != nil || len(res) == 0 || res[0] != "ok" {
			return res, nil, err
		}
		return res, s.acknowledged(wait), nil
	}
	return nil, nil, err
}

// acknowledged returns nil when WAIT counted store.wait_replicas replicas,
// else the failed commit's error.
func (s *Store) acknowledged(wait *goredis.Cmd) error {
	n, err := wait.Int64()
	if err != nil {
		err = fmt.Errorf("redis store: WAIT for %d replicas at %s failed: the commit is not counted as committed; "+
			"nothing acknowledged: %w", s.opts.WaitReplicas, s.url, err)
	} else if n < int64(s.opts.WaitReplicas) {
		err = fmt.Errorf("redis store: only %d of %d replicas acknowledged the commit within %v (store.wait_replicas): "+
			"it is not counted as committed; nothing acknowledged", n, s.opts.WaitReplicas, s.opts.WaitTimeout)
	}
	if err != nil {
		s.log.Warn("a commit was not acknowledged by the replicas", "member", s.member, "url", s.url, "err", err)
	}
	return err
}

// errCommitTimeout is the cause of a context that Options.CommitTimeout ended.
var errCommitTimeout = errors.New("redis store: commit timeout")

// commitContext bounds one Update or Commit by Options.CommitTimeout.
func (s *Store) commitContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.opts.CommitTimeout, errCommitTimeout)
}

// timedOut returns err, or, when ctx ended by the commit timeout, an error
// saying so, logged.
func (s *Store) timedOut(ctx context.Context, op string, err error) error {
	if ctx.Err() == nil || !errors.Is(context.Cause(ctx), errCommitTimeout) {
		return err
	}
	err = fmt.Errorf("redis store: %s at %s did not finish within the commit timeout (%v): the batch may or may not "+
		"have been committed (decided again, it finds its keys if it was): %w", op, s.url, s.opts.CommitTimeout, err)
	s.log.Error("a commit timed out", "member", s.member, "url", s.url, "err", err)
	return err
}
