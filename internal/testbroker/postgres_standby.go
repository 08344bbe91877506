package testbroker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// StartPostgresPrimary starts a server that standbys can stream from
// (wal_level=replica, max_wal_senders=5): StartPostgres with those settings
// before opts.Settings, which may override them or add
// "synchronous_standby_names=*" to make every commit wait for a standby.
func StartPostgresPrimary(tb testing.TB, opts PostgresOptions) *Postgres {
	tb.Helper()
	opts.Settings = append([]string{"wal_level=replica", "max_wal_senders=5"}, opts.Settings...)
	return StartPostgres(tb, opts)
}

// StartStandby makes a streaming standby of p (pg_basebackup -R -X stream,
// as the user the server runs as), starts it on a free port with
// hot_standby=on, synchronous_standby_names empty (so that, promoted, its
// commits wait for no standby), wal_retrieve_retry_interval=100ms (so that
// Promote after the primary died is quick) and settings, and waits until p lists it as
// streaming, and as its synchronous standby when p's
// synchronous_standby_names is set. Its process and directories go at
// cleanup, as StartPostgres's do.
func (p *Postgres) StartStandby(tb testing.TB, settings ...string) *Postgres {
	tb.Helper()
	binDir := filepath.Dir(p.bin)
	tmpl, _, err := postgresTemplate(binDir, p.cred)
	if err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	s := &Postgres{tb: tb, bin: p.bin, cred: p.cred, log: &SyncBuffer{}}
	s.dir = s.baseBackup(p, tmpl)
	tb.Cleanup(s.cleanup)
	s.opts.Settings = append([]string{"hot_standby=on", "synchronous_standby_names=", "cluster_name=" + s.standbyName(),
		// After the primary died, a promotion waits for the next attempt
		// to reach it, every 5 s by default.
		"wal_retrieve_retry_interval=100ms"}, settings...)
	startOnFreePort(tb, "postgres standby", func(port int) error { s.port = port; return s.tryStart() }, s.Log)
	p.waitStreaming(s.standbyName())
	return s
}

// standbyName is the standby's cluster_name, which its walreceiver gives
// the primary as application_name (pg_stat_replication lists it): the
// name of its directory, unique.
func (p *Postgres) standbyName() string { return filepath.Base(p.dir) }

// baseBackup makes the standby's directory, its data/ a base backup of
// primary with the WAL on the disk as the template's is, removed at cleanup.
func (p *Postgres) baseBackup(primary *Postgres, tmpl *pgTemplate) string {
	p.tb.Helper()
	dir, err := os.MkdirTemp(tmpl.dataBase, "standby-")
	if err != nil {
		p.tb.Fatalf("testbroker: %v", err)
	}
	walDir := filepath.Join(tmpl.walBase, filepath.Base(dir))
	p.tb.Cleanup(func() {
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(walDir)
	})
	if err := chownTo(dir, p.cred); err != nil {
		p.tb.Fatalf("testbroker: %v", err)
	}
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(primary.port), "-U", "postgres",
		"-D", filepath.Join(dir, "data"), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"}
	if tmpl.wal != "" {
		if err := os.Mkdir(walDir, 0o700); err != nil {
			p.tb.Fatalf("testbroker: %v", err)
		}
		if err := chownTo(walDir, p.cred); err != nil {
			p.tb.Fatalf("testbroker: %v", err)
		}
		args = append(args, "--waldir="+filepath.Join(walDir, "pg_wal"))
	}
	if out, err := p.asServerUser("pg_basebackup", dir, args...).CombinedOutput(); err != nil {
		p.tb.Fatalf("testbroker: pg_basebackup from port %d: %v\n%s", primary.port, err, out)
	}
	return dir
}

// asServerUser is the PostgreSQL program name, from the server's binary
// directory, run in dir as the user the server runs as.
func (p *Postgres) asServerUser(name, dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(filepath.Dir(p.bin), name), args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: p.cred}
	return cmd
}

// waitStreaming waits until p lists the standby named name as streaming,
// and as synchronous when p's synchronous_standby_names is set.
func (p *Postgres) waitStreaming(name string) {
	p.tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		p.tb.Fatalf("testbroker: connect to the primary on port %d: %v", p.port, err)
	}
	defer conn.Close(context.Background())
	const q = `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'
		AND (sync_state IN ('sync', 'quorum') OR current_setting('synchronous_standby_names') = '')`
	for {
		var n int
		if err := conn.QueryRow(ctx, q, name).Scan(&n); err != nil {
			p.tb.Fatalf("testbroker: standby %s does not stream from port %d within %v: %v", name, p.port, startTimeout, err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			p.tb.Fatalf("testbroker: standby %s does not stream from port %d within %v", name, p.port, startTimeout)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// WALSenders returns the process ids of the server's walsenders: the
// postmaster's children whose title says "walsender".
func (p *Postgres) WALSenders() []int {
	if !p.Running() {
		return nil
	}
	var pids []int
	for _, k := range childrenOf(p.proc.pid()) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(k) + "/cmdline")
		if err == nil && strings.Contains(string(b), "walsender") {
			pids = append(pids, k)
		}
	}
	return pids
}

// PauseWALSender stops the server's walsenders with SIGSTOP and waits until
// they are stopped: from then on no standby receives anything, and a commit
// that waits for a synchronous standby waits until ResumeWALSender. It fails
// the test when no walsender runs.
func (p *Postgres) PauseWALSender() {
	p.tb.Helper()
	pids := p.WALSenders()
	if len(pids) == 0 {
		p.tb.Fatalf("testbroker: postgres on port %d has no walsender to pause", p.port)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			p.tb.Fatalf("testbroker: pause walsender %d: %v", pid, err)
		}
		waitStopped(pid)
	}
}

// ResumeWALSender continues the walsenders PauseWALSender stopped.
func (p *Postgres) ResumeWALSender() {
	p.tb.Helper()
	for _, pid := range p.WALSenders() {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}

// KillAll ends the postmaster and all its children, walsenders paused or
// not, with SIGKILL at once (the postmaster stopped first, so it neither
// forks nor reacts while they die), and waits until none is left: what was
// not sent to a standby by then never is. It is Kill.
func (p *Postgres) KillAll() { p.tb.Helper(); p.Kill() }

// Promote ends the recovery of a standby (pg_ctl promote, waiting until it
// accepts writes), which then keeps every WAL record it received and nothing
// more.
func (p *Postgres) Promote() {
	p.tb.Helper()
	if out, err := p.asServerUser("pg_ctl", p.dir, "-D", p.DataDir(), "-w", "-t", strconv.Itoa(int(startTimeout/time.Second)), "promote").CombinedOutput(); err != nil {
		p.tb.Fatalf("testbroker: promote the standby on port %d: %v\n%s", p.port, err, out)
	}
}

// MultiHostURL is a URL naming every server given, in order, for a client
// that connects to the first of them that accepts writes
// (target_session_attrs=read-write), as after a failover.
func MultiHostURL(servers ...*Postgres) string {
	hosts := make([]string, len(servers))
	for i, s := range servers {
		hosts[i] = s.Addr()
	}
	return "postgres://postgres@" + strings.Join(hosts, ",") + "/postgres?target_session_attrs=read-write&sslmode=disable"
}
