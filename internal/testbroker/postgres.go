package testbroker

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresBinDirEnv names an environment variable that, when set, is the
// directory holding the PostgreSQL binaries (initdb, postgres) to run.
const PostgresBinDirEnv = "REPLAYGUARD_POSTGRES_BINDIR"

// PostgresOptions configures a PostgreSQL server. The zero value is the
// durable configuration a shared store requires: fsync=on and
// synchronous_commit=on.
type PostgresOptions struct {
	// Port to listen on, on 127.0.0.1. Zero picks a free port.
	Port int
	// Settings are extra "name=value" run-time parameters, each passed as
	// -c after the defaults, which they override: "synchronous_commit=off".
	Settings []string
}

// Postgres is a PostgreSQL server (the postmaster and its backends) running
// as a child process on a loopback port, on a data directory of its
// own copied from a template made once per test binary. Its methods are
// meant for the test goroutine; they fail the test on error. The process
// group is killed at cleanup, the directory removed, and the server's log is
// printed when the test has failed.
//
// PostgreSQL refuses to run as root: then the server runs as the OS user
// "postgres".
type Postgres struct {
	tb   testing.TB
	bin  string // the postgres binary
	opts PostgresOptions
	cred *syscall.Credential // nil: run as this process's user
	port int
	dir  string // holds data/ and the Unix socket
	log  *SyncBuffer
	proc *child
}

// PostgresBinDir returns the directory holding initdb and postgres: the one
// named by REPLAYGUARD_POSTGRES_BINDIR, /usr/lib/postgresql/15/bin, the one
// of postgres on PATH, or /usr/lib/postgresql/*/bin of another version. When there is none, it skips the test, or fails
// it when REPLAYGUARD_REQUIRE_SERVICES=1.
func PostgresBinDir(tb testing.TB) string {
	tb.Helper()
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv(PostgresBinDirEnv); dir != "" {
		if !has(dir) {
			missing(tb, "initdb and postgres in "+dir)
		}
		return dir
	}
	if has("/usr/lib/postgresql/15/bin") {
		return "/usr/lib/postgresql/15/bin"
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(p)) {
			return filepath.Dir(p)
		}
	}
	// Another major version where Debian installs it, the newest first.
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return pgVersion(b) - pgVersion(a) })
	for _, dir := range dirs {
		if has(dir) {
			return dir
		}
	}
	missing(tb, "PostgreSQL (initdb and postgres)")
	return ""
}

func pgVersion(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// StartPostgres starts a server on a fresh copy of the template data
// directory (made by initdb at the first call in the test binary) and waits
// until it accepts a connection.
func StartPostgres(tb testing.TB, opts PostgresOptions) *Postgres {
	tb.Helper()
	binDir := PostgresBinDir(tb)
	p := &Postgres{tb: tb, bin: filepath.Join(binDir, "postgres"), opts: opts, log: &SyncBuffer{}}
	p.cred = postgresCredential(tb)
	tmpl, made, err := postgresTemplate(binDir, p.cred)
	if err != nil {
		tb.Fatalf("testbroker: %v", err)
	}
	if made {
		tb.Logf("testbroker: initdb made the template data directory %s in %v", tmpl.data, tmpl.elapsed.Round(time.Millisecond))
	}
	p.dir = p.newServerDir(tmpl)
	tb.Cleanup(p.cleanup)
	if opts.Port != 0 {
		p.port = opts.Port
		p.start()
		return p
	}
	startOnFreePort(tb, "postgres", func(port int) error { p.port = port; return p.tryStart() }, p.Log)
	return p
}

// newServerDir makes the server's directory, with a copy of the template
// as data/, removed at cleanup.
func (p *Postgres) newServerDir(tmpl *pgTemplate) string {
	p.tb.Helper()
	dir, remove, err := tmpl.copyTo(p.cred)
	if err != nil {
		p.tb.Fatalf("testbroker: copy the template data directory: %v", err)
	}
	p.tb.Cleanup(remove)
	return dir
}

// URL is the server's address for PostgreSQL clients, database and
// superuser "postgres", trust authentication.
func (p *Postgres) URL() string {
	return "postgres://postgres@" + p.Addr() + "/postgres?sslmode=disable"
}

// Addr is the server's host:port.
func (p *Postgres) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)) }

// Port is the server's TCP port.
func (p *Postgres) Port() int { return p.port }

// DataDir is the server's data directory: on /dev/shm when that is a tmpfs
// with room, its pg_wal then a symbolic link to a directory on the disk
// under os.TempDir(), so that commits wait for a real fsync.
func (p *Postgres) DataDir() string { return filepath.Join(p.dir, "data") }

// Log returns what the server has written to stderr, over all restarts.
func (p *Postgres) Log() string { return p.log.String() }

// Running reports whether the postmaster is alive (possibly paused).
func (p *Postgres) Running() bool { return p.proc.running() }

// Kill ends the postmaster and every backend with SIGKILL, a crash, and
// waits until none is left. A transaction committed with fsync=on and
// synchronous_commit=on is in the WAL already; Restart recovers it.
func (p *Postgres) Kill() { p.tb.Helper(); p.proc.signalAndWait(syscall.SIGKILL) }

// Stop ends the server with SIGINT, a fast shutdown (open transactions are
// rolled back, a shutdown checkpoint written), and waits for it to exit.
func (p *Postgres) Stop() { p.tb.Helper(); p.proc.signalAndWait(syscall.SIGINT) }

// Pause freezes the postmaster and every backend with SIGSTOP: connections
// stay open but nothing is answered.
func (p *Postgres) Pause() { p.tb.Helper(); p.proc.signal(p.tb, syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (p *Postgres) Resume() { p.tb.Helper(); p.proc.signal(p.tb, syscall.SIGCONT) }

// Restart starts the server again on the same port and data directory:
// after Kill, it runs crash recovery from the WAL before it accepts a
// connection. A running server is stopped (SIGINT) first.
func (p *Postgres) Restart() {
	p.tb.Helper()
	if p.Running() {
		p.Stop()
	}
	p.log.WriteString("--- testbroker: restart ---\n")
	p.start()
}

func (p *Postgres) start() {
	p.tb.Helper()
	if err := p.tryStart(); err != nil {
		p.tb.Fatalf("testbroker: start postgres on port %d: %v\n%s", p.port, err, p.Log())
	}
}

func (p *Postgres) tryStart() error {
	args := []string{
		"-D", p.DataDir(),
		"-p", strconv.Itoa(p.port),
		// TCP only: a socket path under a long temporary directory can pass
		// the 107 bytes a Unix socket's name may have.
		"-c", "unix_socket_directories=",
		"-c", "listen_addresses=127.0.0.1",
		"-c", "fsync=on",
		"-c", "synchronous_commit=on",
		// Dynamic shared memory as files in the data directory, which
		// goes at cleanup: the POSIX segments a killed server leaves in
		// /dev/shm would stay until the machine restarts.
		"-c", "dynamic_shared_memory_type=mmap",
	}
	for _, s := range p.opts.Settings {
		args = append(args, "-c", s)
	}
	cmd := exec.Command(p.bin, args...)
	cmd.Dir = p.dir
	cmd.Stdout, cmd.Stderr = p.log, p.log
	// A process group of its own, out of reach of a terminal's ^C.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: p.cred}
	c, err := startChild(cmd)
	if err != nil {
		return err
	}
	p.proc = c
	if err := p.waitReady(); err != nil {
		c.signalAndWait(syscall.SIGKILL)
		return err
	}
	return nil
}

// waitReady waits until this server, not another one that took the port,
// accepts a connection and answers a query: during crash recovery it refuses
// connections ("the database system is starting up").
func (p *Postgres) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	var last error
	for time.Now().Before(deadline) {
		if !p.proc.running() {
			return fmt.Errorf("postgres exited at start")
		}
		dir, err := p.dataDirectory()
		if err == nil && dir != p.DataDir() {
			return fmt.Errorf("another server (data directory %s) answers on port %d", dir, p.port)
		}
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("postgres not ready after %v: %v", startTimeout, last)
}

func (p *Postgres) dataDirectory() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	var dir string
	err = conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir)
	return dir, err
}

func (p *Postgres) cleanup() {
	p.proc.signalAndWait(syscall.SIGKILL)
	removeSysvShm(p.DataDir())
	if p.tb.Failed() {
		p.tb.Logf("testbroker: postgres on port %d (data %s) logged:\n%s", p.port, p.DataDir(), tail(p.Log(), 64<<10))
	}
}

// removeSysvShm removes the System V shared memory segment of a server on
// dataDir that was killed, if it left one: only a server's clean shutdown,
// or a restart on the same data directory, removes it otherwise. The
// segment's id is on the seventh line of postmaster.pid, which a clean
// shutdown deletes.
func removeSysvShm(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return
	}
	f := strings.Fields(lines[6]) // key shmid
	if len(f) != 2 {
		return
	}
	if id, err := strconv.Atoi(f[1]); err == nil {
		const ipcRMID = 0
		_, _, _ = syscall.Syscall(syscall.SYS_SHMCTL, uintptr(id), ipcRMID, 0)
	}
}
