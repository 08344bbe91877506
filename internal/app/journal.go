package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"time"

	"github.com/replayguard/replayguard/config"
	"github.com/replayguard/replayguard/engine"
	"github.com/replayguard/replayguard/journal"
)

// checkEvery is how often run compares the shared store's head of the
// member's chain with the journal's, so that a member with nothing to
// decide finds a failover too: a third of the lease, as often as the lease
// is renewed.
const checkEvery = 5 * time.Second

// JournalDir is the directory of member's journal on the store sc names:
// one per member and store under store.journal.path, so that pointing a
// member at another store (or group) never compares it with the journal
// of the first.
func JournalDir(sc config.StoreConfig, member string) string {
	return journal.Dir(sc.Journal.Path, member+"@"+storeID(sc))
}

// storeID names the store by its kind, server (without credentials),
// schema and prefix, in 12 hex digits.
func storeID(sc config.StoreConfig) string {
	where := sc.URL
	if u, err := url.Parse(sc.URL); err == nil && u.User != nil {
		u.User = url.User(u.User.Username())
		where = u.String()
	}
	sum := sha256.Sum256([]byte(sc.Kind + "\x00" + where + "\x00" + sc.Schema + "\x00" + sc.Prefix))
	return hex.EncodeToString(sum[:6])
}

// openJournal opens the member's journal, or returns nil when the store is
// not shared or store.journal.path is off.
func openJournal(sc config.StoreConfig, member string, log *slog.Logger) (*journal.Journal, error) {
	if !sc.Shared() || sc.Journal.Path == config.JournalOff || member == "" {
		return nil, nil
	}
	dir := JournalDir(sc, member)
	j, err := journal.Open(dir, journal.Options{Retention: time.Duration(sc.Journal.Retention), Logger: log})
	if err != nil {
		return nil, fmt.Errorf("store.journal: %w", err)
	}
	last, _ := j.Last()
	log.Info("journal open", "dir", dir, "retention", time.Duration(sc.Journal.Retention), "head", last.Head.Position)
	return j, nil
}

// storeName names the store in the engine's messages: its kind and server.
func storeName(sc config.StoreConfig) string {
	if !sc.Shared() {
		return sc.Kind
	}
	where := sc.URL
	if u, err := url.Parse(sc.URL); err == nil {
		where = u.Redacted()
	}
	return fmt.Sprintf("%s (%s)", sc.Kind, where)
}

// CheckStore compares the shared store's head of the member's chain with
// the journal's every checkEvery until ctx is done (see
// engine.Engine.CheckStore); a loss is logged by the engine. A check that
// cannot read the store holds the member back (storeError) until one can.
// It returns an error wrapping engine.ErrMemberHeld once the store has
// said that another process holds the member's lease (a restart of the
// member elsewhere while this one stalled): this process can commit
// nothing more, and its broker connection, under the same client id
// when the member is named after it, would take the session from the
// other in turn.
func (a *App) CheckStore(ctx context.Context) error {
	t := time.NewTicker(checkEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := a.fenced(); err != nil {
			return err
		}
		err := a.Engine.CheckStore(ctx)
		var l *engine.StoreLoss
		switch {
		case ctx.Err() != nil:
		case err != nil && !errors.As(err, &l):
			a.checkErr.Store(&err)
			a.Log.Warn("checking the store's chain head", "err", err)
		default: // the store answered; a loss holds the member back itself
			a.checkErr.Store(nil)
		}
	}
}

// fenced returns an error wrapping engine.ErrMemberHeld when the shared
// store said that another process holds the member's lease (or that the
// member is no longer registered).
func (a *App) fenced() error {
	rep := a.Store.Capabilities().Stats
	if rep == nil {
		return nil
	}
	if why := rep.SharedStats().Fenced; why != "" {
		return fmt.Errorf("%w: %s; this process stops", engine.ErrMemberHeld, why)
	}
	return nil
}

// storeError is why the shared store holds the member back though none of
// its writes failed: the last check could not read the store, or the last
// lease renewal failed; nil once both succeed again, so a member with
// nothing to write follows the store down and back up. Nil on a
// single-owner store.
func (a *App) storeError() error {
	if err := a.checkErr.Load(); err != nil {
		return *err
	}
	if rep := a.Store.Capabilities().Stats; rep != nil {
		if e := rep.SharedStats().LeaseError; e != "" {
			return errors.New(e)
		}
	}
	return nil
}
