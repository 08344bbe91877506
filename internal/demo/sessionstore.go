package demo

import (
	"fmt"
	"log/slog"

	pebbledb "github.com/cockroachdb/pebble"
	"github.com/mochi-mqtt/server/v2/hooks/storage"
	"github.com/mochi-mqtt/server/v2/hooks/storage/pebble"
)

// sessionStore is mochi's pebble storage hook, which writes every session
// change (Mode Sync for the demo), except that the stored state is read at
// start by sessionStore itself. mochi's hook reads it with iterators it
// never closes, and pebble then keeps goroutines of the closed database
// running forever; here the store is opened first, read with iterators
// that are closed, and closed again before the hook opens it. The server
// restores exactly the same clients, subscriptions and in-flight messages.
type sessionStore struct {
	*pebble.Hook
	clients  []storage.Client
	subs     []storage.Subscription
	inflight []storage.Message
	retained []storage.Message
}

func newSessionStore() *sessionStore { return &sessionStore{Hook: new(pebble.Hook)} }

// Init reads what the store at the configured path holds, then lets mochi's
// hook open it for writing.
func (s *sessionStore) Init(config any) error {
	opts, ok := config.(*pebble.Options)
	if !ok || opts.Path == "" {
		return fmt.Errorf("session store: want *pebble.Options with a path, got %T", config)
	}
	var logger pebbledb.Logger
	if opts.Options != nil {
		logger = opts.Options.Logger
	}
	if err := s.load(opts.Path, logger); err != nil {
		return fmt.Errorf("session store %s: %w", opts.Path, err)
	}
	return s.Hook.Init(config)
}

func (s *sessionStore) load(path string, logger pebbledb.Logger) (err error) {
	db, err := pebbledb.Open(path, &pebbledb.Options{Logger: logger})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); err == nil {
			err = cerr
		}
	}()
	if err := scan(db, storage.ClientKey, &s.clients); err != nil {
		return err
	}
	if err := scan(db, storage.SubscriptionKey, &s.subs); err != nil {
		return err
	}
	if err := scan(db, storage.InflightKey, &s.inflight); err != nil {
		return err
	}
	return scan(db, storage.RetainedKey, &s.retained)
}

// inflightBySession counts the in-flight messages of each client session in
// the store at path, which no broker may have open.
func inflightBySession(path string, log *slog.Logger) (map[string]int, error) {
	s := newSessionStore()
	if err := s.load(path, pebbleLogger{log}); err != nil {
		return nil, fmt.Errorf("session store %s: %w", path, err)
	}
	n := map[string]int{}
	for _, m := range s.inflight {
		n[m.Client]++
	}
	return n, nil
}

// scan decodes every value under prefix into out, skipping what does not
// decode, as mochi's hook does.
func scan[T any, P interface {
	*T
	UnmarshalBinary([]byte) error
}](db *pebbledb.DB, prefix string, out *[]T) error {
	upper := []byte(prefix)
	upper[len(upper)-1]++ // the prefixes are upper-case letters: no overflow
	iter, err := db.NewIter(&pebbledb.IterOptions{LowerBound: []byte(prefix), UpperBound: upper})
	if err != nil {
		return err
	}
	for iter.First(); iter.Valid(); iter.Next() {
		var v T
		if P(&v).UnmarshalBinary(iter.Value()) == nil {
			*out = append(*out, v)
		}
	}
	return iter.Close()
}

// StoredClients returns the clients read at Init.
func (s *sessionStore) StoredClients() ([]storage.Client, error) { return s.clients, nil }

// StoredSubscriptions returns the subscriptions read at Init.
func (s *sessionStore) StoredSubscriptions() ([]storage.Subscription, error) { return s.subs, nil }

// StoredInflightMessages returns the in-flight messages read at Init.
func (s *sessionStore) StoredInflightMessages() ([]storage.Message, error) { return s.inflight, nil }

// StoredRetainedMessages returns the retained messages read at Init.
func (s *sessionStore) StoredRetainedMessages() ([]storage.Message, error) { return s.retained, nil }
