package redis

import (
	"context"
	"encoding"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replayguard/replayguard/engine"
)

// read is what one batch was decided on: the stored value of each key
// ("" when absent) and the version of each source and entity ("0"), read
// under locks.
type read struct {
	r        *engine.Reads
	locks    *locks
	names    []string // the keys' names
	keys     []string
	sources  []string
	entities []string
}

// read takes l and fetches r's keys, sources and entities with their
// versions in one round trip: the read script takes the locks and reads the
// rows, and an MGET beside it reads the keys (each key's value is checked on
// its own by the write, so it need not be read with the rows). While another
// Update holds one of the locks it waits, until deadline; then the script
// reads the keys too, once it has the locks.
func (s *Store) read(ctx context.Context, r *engine.Reads, l *locks, deadline time.Time) (*engine.Rows, *read, error) {
	names := make([]string, len(r.Keys))
	for i := range r.Keys {
		names[i] = s.k.key(r.Keys[i])
	}
	keys, args := s.readArgs(r, l, len(names))
	res, kv, err := s.readLocked(ctx, keys, args, names, deadline)
	if err != nil {
		return nil, nil, err
	}
	l.held = l.held || len(l.names) > 0
	return decodeRead(r, l, names, res, kv)
}

// readArgs lays r out as the read script's KEYS and ARGV, asking for none
// of its n keys: the caller reads them beside the script until it waits.
func (s *Store) readArgs(r *engine.Reads, l *locks, n int) ([]string, []any) {
	keys := make([]string, 0, 4+len(l.names)+n)
	keys = append(keys, s.k.sourceVersions, s.k.sources, s.k.entityVersions, s.k.entities)
	keys = append(keys, l.names...)
	args := make([]any, 0, 6+len(r.Sources)+len(r.Entities))
	args = append(args, l.token, s.lockTTL().Milliseconds(), len(l.names), 0, len(r.Sources), len(r.Entities))
	for _, id := range r.Sources {
		args = append(args, id)
	}
	for _, name := range r.Entities {
		args = append(args, name)
	}
	return keys, args
}

// readLocked runs the read script until it has taken the locks: at first
// with an MGET of the keys names beside it, and once it found a lock held,
// reading the keys itself, since their values must come after the wait.
// After the script found a lock held, it waits until that lock is gone
// (an EXISTS of it after each release or sleep) before it runs the script
// again: each run names every lock and row of the batch, and costs the
// server far more. It returns the script's answer and the keys' values
// (nil when the script read them).
func (s *Store) readLocked(ctx context.Context, keys []string, args []any, names []string, deadline time.Time) (res, kv []any, err error) {
	held := "" // the lock the last run found held
	for wait := lockWaitBase; ; wait = min(2*wait, lockWaitMax) {
		woken := s.wake.next() // a release after this ends the wait below
		if held != "" {
			if held, err = s.stillHeld(ctx, held); err != nil {
				return nil, nil, err
			}
		}
		switch {
		case held != "":
		case wait == lockWaitBase:
			res, kv, err = s.readBeside(ctx, keys, args, names)
		default:
			args[3], kv = len(names), nil
			res, err = readScript.Run(ctx, s.c, append(keys, names...), args...).Slice()
		}
		if err != nil {
			return nil, nil, s.fail("read the batch's rows", err)
		}
		if held == "" {
			if len(res) == 6 {
				return res, kv, nil
			}
			if held, err = heldLock(res, keys); err != nil {
				return nil, nil, err
			}
			s.stats.LockWaits.Add(1)
		}
		if err := s.pause(ctx, wait, deadline, woken); err != nil {
			return nil, nil, err
		}
	}
}

// heldLock is the name of the lock that the read script's "held" answer
// res names among keys (the script's KEYS).
func heldLock(res []any, keys []string) (string, error) {
	if st, _ := res[0].(string); st == "held" && len(res) == 2 {
		if i, err := strconv.Atoi(fmt.Sprint(res[1])); err == nil && i >= 1 && 4+i <= len(keys) {
			return keys[3+i], nil
		}
	}
	return "", fmt.Errorf("redis store: the read script answered %v", res)
}

// stillHeld returns lock when another Update still holds it, and "" when
// it is gone.
func (s *Store) stillHeld(ctx context.Context, lock string) (string, error) {
	n, err := s.c.Exists(ctx, lock).Result()
	if err != nil {
		return "", s.fail("read a row lock", err)
	}
	if n == 0 {
		return "", nil
	}
	return lock, nil
}

// pause sleeps a jittered while below wait, or until woken is closed; it
// fails with engine.ErrContention when that would pass deadline.
func (s *Store) pause(ctx context.Context, wait time.Duration, deadline time.Time, woken <-chan struct{}) error {
	d := wait/2 + rand.N(wait/2+1)
	if time.Now().Add(d).After(deadline) {
		return fmt.Errorf("%w: member %q: rows stayed locked by other members for %v",
			engine.ErrContention, s.member, lockWaitTTLs*s.lockTTL())
	}
	return sleepUnless(ctx, d, woken)
}

// decodeRead decodes the read script's answer res and the keys' values
// kv (nil: they are res[1]) into the rows decide is handed and what the
// write checks them against.
func decodeRead(r *engine.Reads, l *locks, names []string, res, kv []any) (*engine.Rows, *read, error) {
	if kv == nil {
		var err error
		if kv, err = answerList(res, 1, len(r.Keys)); err != nil {
			return nil, nil, err
		}
	} else if len(kv) != len(r.Keys) {
		return nil, nil, fmt.Errorf("redis store: MGET answered %d values for %d keys", len(kv), len(r.Keys))
	}
	rows := &engine.Rows{}
	rd := &read{r: r, locks: l, names: names, keys: make([]string, len(r.Keys))}
	for i, v := range kv {
		if v, ok := v.(string); ok {
			e, err := decodeKeyValue(r.Keys[i], v)
			if err != nil {
				return nil, nil, fmt.Errorf("redis store: %w", err)
			}
			rows.Keys = append(rows.Keys, e)
			rd.keys[i] = v
		}
	}
	var err error
	if rd.sources, err = decodeAnswerRows(res, 2, len(r.Sources), &rows.Sources); err != nil {
		return nil, nil, err
	}
	if rd.entities, err = decodeAnswerRows(res, 4, len(r.Entities), &rows.Entities); err != nil {
		return nil, nil, err
	}
	return rows, rd, nil
}

// answerList is res[i], a list of the n values asked for.
func answerList(res []any, i, n int) ([]any, error) {
	v, ok := res[i].([]any)
	if !ok || len(v) != n {
		return nil, fmt.Errorf("redis store: the read script answered %d values for %d asked", len(v), n)
	}
	return v, nil
}

// decodeAnswerRows decodes n rows whose versions are res[at] and whose
// data are res[at+1] into out, and returns their versions.
func decodeAnswerRows[T any, P row[T]](res []any, at, n int, out *[]T) ([]string, error) {
	vs, err := answerList(res, at, n)
	if err != nil {
		return nil, err
	}
	ds, err := answerList(res, at+1, n)
	if err != nil {
		return nil, err
	}
	return decodeRows[T, P](vs, ds, out)
}

// readBeside runs the read script, which reads no keys, and an MGET of
// names in one pipeline, loading the script first when the server does not
// know it.
func (s *Store) readBeside(ctx context.Context, keys []string, args []any, names []string) (res, kv []any, err error) {
	for range 2 {
		var script *goredis.Cmd
		var mget *goredis.SliceCmd
		_, err = s.c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			script = readScript.EvalSha(ctx, p, keys, args...)
			if len(names) > 0 {
				mget = p.MGet(ctx, names...)
			}
			return nil
		})
		if err != nil && goredis.HasErrorPrefix(script.Err(), "NOSCRIPT") {
			if err = readScript.Load(ctx, s.c).Err(); err == nil {
				continue
			}
		}
		if err != nil {
			return nil, nil, err
		}
		if res, err = script.Slice(); err != nil {
			return nil, nil, err
		}
		if mget != nil {
			kv = mget.Val()
		} else {
			kv = []any{}
		}
		return res, kv, nil
	}
	return nil, nil, err
}

// row is a source's or an entity's state, as its hash field holds it.
type row[T any] interface {
	*T
	encoding.BinaryUnmarshaler
}

// decodeRows appends the present rows of data and returns the version of
// each ("0" for an absent one).
func decodeRows[T any, P row[T]](vs, ds []any, out *[]T) ([]string, error) {
	versions := make([]string, len(vs))
	for i, v := range vs {
		versions[i] = "0"
		if v, ok := v.(string); ok {
			versions[i] = v
		}
		d, ok := ds[i].(string)
		if !ok {
			continue
		}
		var v T
		if err := P(&v).UnmarshalBinary([]byte(d)); err != nil {
			return nil, fmt.Errorf("redis store: %w", err)
		}
		*out = append(*out, v)
	}
	return versions, nil
}
