package postgres

import (
	"strings"
	"testing"
)

func TestReplicationRefusal(t *testing.T) {
	const where = "postgres://postgres@127.0.0.1:5432/postgres"
	tests := []struct {
		name  string
		r     replication
		async string // what SharedStats reports when allowed
		want  string // in the error when not allowed; "" accepted
	}{
		{name: "a primary without standbys is accepted", r: replication{syncCommit: "on"}},
		{name: "a primary with a standby a commit waits for is accepted",
			r: replication{standbyNames: "*", syncCommit: "on", streaming: 1}},
		{name: "remote_write waits for the standby too",
			r: replication{standbyNames: "ANY 1 (a, b)", syncCommit: "remote_write", streaming: 2}},
		{name: "an asynchronous standby is refused, naming synchronous_standby_names",
			r:     replication{syncCommit: "on", streaming: 1},
			async: "1 streaming standby, synchronous_standby_names empty",
			want: "postgres store: 1 standby streams from " + where + " with synchronous_standby_names empty: a commit acknowledged here can be lost when a standby is promoted " +
				"(set synchronous_standby_names, e.g. '*' or 'ANY 1 (...)', or store.allow_async_replication: true to accept that; the member's journal then recovers what a failover loses)"},
		{name: "synchronous_commit = local is refused, naming it",
			r:     replication{standbyNames: "*", syncCommit: "local", streaming: 2},
			async: "2 streaming standbys, synchronous_commit = local",
			want:  "2 standbys stream from " + where + " with synchronous_commit = local: a commit acknowledged here can be lost when a standby is promoted (set synchronous_commit = on (or remote_write, remote_apply), or store.allow_async_replication: true"},
		{name: "synchronous_commit = off is refused with a standby",
			r:     replication{standbyNames: "*", syncCommit: "off", streaming: 1},
			async: "1 streaming standby, synchronous_commit = off",
			want:  "with synchronous_commit = off"},
		{name: "walsenders the role cannot see are not refused",
			r: replication{syncCommit: "on", hidden: 1}},
		{name: "a standby is refused whatever is allowed",
			r:    replication{syncCommit: "on", inRecovery: true},
			want: where + " is a standby (in recovery): point store.url at the primary, or list every host with target_session_attrs=read-write"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.r.async(); got != tt.async {
				t.Errorf("async() = %q, want %q", got, tt.async)
			}
			err := tt.r.refusal(where, false)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("refusal = %v, want %q", err, tt.want)
			}
			allowed := tt.r.refusal(where, true)
			if (allowed != nil) != tt.r.inRecovery {
				t.Errorf("allowed: refusal = %v", allowed)
			}
		})
	}
}
