package memory

import (
	"context"

	"github.com/replayguard/replayguard/engine"
)

var _ engine.ShareMembership = (*Member)(nil)

// JoinShare records that the handle's member holds group's shared
// subscription, until its handle is closed or it is granted leave.
// clientID is not kept: the group in memory hands no session over
// (engine.ShareAdopter), its members living and dying with one process.
func (m *Member) JoinShare(ctx context.Context, group, clientID string) error {
	if err := m.lockWriter("join a share group"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	if m.g.shares == nil {
		m.g.shares = map[string]string{}
	}
	m.g.shares[m.member] = group
	return nil
}

// QuitShare records that the handle's member may no longer hold group's
// shared subscription.
func (m *Member) QuitShare(ctx context.Context, group string) error {
	if err := m.lockWriter("quit a share group"); err != nil {
		return err
	}
	defer m.g.mu.Unlock()
	if m.g.shares[m.member] == group {
		delete(m.g.shares, m.member)
	}
	return nil
}

// LeaveShare grants the handle's member leave from group when another
// member with an open handle holds group's subscription, and marks it as
// having left; under the group's lock, so two members never both leave
// the last.
func (m *Member) LeaveShare(ctx context.Context, group string) (bool, error) {
	if err := m.lockWriter("leave a share group"); err != nil {
		return false, err
	}
	defer m.g.mu.Unlock()
	if m.g.shares[m.member] != group {
		return false, nil
	}
	for other, g := range m.g.shares {
		if other != m.member && g == group && m.g.members[other] {
			delete(m.g.shares, m.member)
			return true, nil
		}
	}
	return false, nil
}
