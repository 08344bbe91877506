package testbroker

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// pgTemplate is the data directory initdb made once for this test binary;
// each server starts on a copy of it, which takes a fraction of initdb's
// time.
//
// Creating the data directory's thousand files is most of either cost, on a
// disk: so the data directories live on a tmpfs where there is one, and only
// their WAL (pg_wal, a symbolic link) on the disk under os.TempDir(). A
// commit still waits for an fsync of the WAL on the disk; what a tmpfs
// changes is that a checkpoint's fsync of the data files costs nothing,
// and that a crash of the machine, which no test makes, would lose them.
type pgTemplate struct {
	dataBase string // where the data directories are: pgShm/…-PID, or walBase
	walBase  string // os.TempDir()/replayguard-postgres-PID
	data     string // dataBase/template
	wal      string // walBase/template-wal, or "": the WAL is in data
	elapsed  time.Duration
}

var pgTmpl struct {
	once sync.Once
	t    *pgTemplate
	err  error
}

const (
	pgBasePrefix = "replayguard-postgres-"
	pgShm        = "/dev/shm"
	tmpfsMagic   = 0x01021994
	pgShmFree    = 1 << 30 // what pgShm must have free to be used
)

// postgresTemplate makes the template at the first call, which it reports
// in made, and returns it.
func postgresTemplate(binDir string, cred *syscall.Credential) (t *pgTemplate, made bool, err error) {
	pgTmpl.once.Do(func() {
		removeStalePostgresDirs()
		pgTmpl.t, pgTmpl.err = makePostgresTemplate(binDir, cred)
		made = true
	})
	return pgTmpl.t, made, pgTmpl.err
}

// CleanupPostgres removes the template data directory that StartPostgres
// makes once per test binary. Call it from TestMain after the tests have
// run; without it, the next test binary that starts PostgreSQL removes it.
func CleanupPostgres() {
	if t := pgTmpl.t; t != nil {
		_ = os.RemoveAll(t.dataBase)
		_ = os.RemoveAll(t.walBase)
	}
}

func makePostgresTemplate(binDir string, cred *syscall.Credential) (*pgTemplate, error) {
	start := time.Now()
	name := pgBasePrefix + strconv.Itoa(os.Getpid())
	t := &pgTemplate{walBase: filepath.Join(os.TempDir(), name)}
	t.dataBase = t.walBase
	if tmpfsRoom(pgShm) && filepath.Clean(os.TempDir()) != pgShm {
		t.dataBase = filepath.Join(pgShm, name)
	}
	for _, base := range []string{t.walBase, t.dataBase} {
		if err := makeOwnedDir(base, cred); err != nil {
			return nil, err
		}
	}
	t.data = filepath.Join(t.dataBase, "template")
	if t.dataBase != t.walBase {
		t.wal = filepath.Join(t.walBase, "template-wal")
	}
	if out, err := initdb(binDir, t.data, t.wal, cred).CombinedOutput(); err != nil {
		_ = os.RemoveAll(t.dataBase)
		_ = os.RemoveAll(t.walBase)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	t.elapsed = time.Since(start)
	return t, nil
}

// makeOwnedDir makes dir anew, owned by the user of cred, after checking
// that this user can reach it.
func makeOwnedDir(dir string, cred *syscall.Credential) error {
	if err := reachable(filepath.Dir(dir), cred); err != nil {
		return err
	}
	_ = os.RemoveAll(dir) // a previous process with this pid
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	return chownTo(dir, cred)
}

// tmpfsRoom reports whether dir is a tmpfs with pgShmFree bytes free.
func tmpfsRoom(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return int64(st.Type) == tmpfsMagic && st.Bavail*uint64(st.Bsize) >= pgShmFree
}

// initdb is the command that makes a data directory at dir, whose parent
// the user of cred owns, with its WAL in walDir unless that is empty. It
// skips fsync: the tests crash processes, not the machine, and each copy is
// written through the page cache anyway.
func initdb(binDir, dir, walDir string, cred *syscall.Credential) *exec.Cmd {
	args := []string{"-D", dir, "-U", "postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions"}
	if walDir != "" {
		args = append(args, "--waldir="+walDir)
	}
	cmd := exec.Command(filepath.Join(binDir, "initdb"), args...)
	cmd.Dir = filepath.Dir(dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	return cmd
}

// copyTo makes a server's directory dataBase/NAME, owned by the user of
// cred, with a copy of the template as its data/, and the WAL's copy in
// walBase/NAME. remove deletes both.
func (t *pgTemplate) copyTo(cred *syscall.Credential) (dir string, remove func(), err error) {
	if dir, err = os.MkdirTemp(t.dataBase, "server-"); err != nil {
		return "", nil, err
	}
	walDir := filepath.Join(t.walBase, filepath.Base(dir))
	remove = func() {
		_ = os.RemoveAll(dir)
		_ = os.RemoveAll(walDir)
	}
	if err = t.copyFiles(dir, walDir, cred); err != nil {
		remove()
		return "", nil, err
	}
	return dir, remove, nil
}

func (t *pgTemplate) copyFiles(dir, walDir string, cred *syscall.Credential) error {
	if err := chownTo(dir, cred); err != nil {
		return err
	}
	data := filepath.Join(dir, "data")
	if t.wal == "" {
		return copyTree(t.data, data, cred, "")
	}
	if err := copyTree(t.data, data, cred, "pg_wal"); err != nil {
		return err
	}
	if err := os.Mkdir(walDir, 0o700); err != nil {
		return err
	}
	if err := chownTo(walDir, cred); err != nil {
		return err
	}
	wal := filepath.Join(walDir, "pg_wal")
	if err := copyTree(t.wal, wal, cred, ""); err != nil {
		return err
	}
	if err := os.Symlink(wal, filepath.Join(data, "pg_wal")); err != nil {
		return err
	}
	return chownTo(filepath.Join(data, "pg_wal"), cred)
}

// removeStalePostgresDirs removes what test binaries that have exited left
// in os.TempDir() and pgShm: templates, and servers' directories after a
// crash.
func removeStalePostgresDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), pgBasePrefix+"*"))
	shm, _ := filepath.Glob(filepath.Join(pgShm, pgBasePrefix+"*"))
	dirs = append(dirs, shm...)
	for _, dir := range dirs {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), pgBasePrefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(dir)
		}
	}
}

// postgresCredential is nil when this process does not run as root, and the
// OS user "postgres" otherwise: PostgreSQL refuses to run as root. When root
// has no such user, the test is skipped (or fails, see missing).
func postgresCredential(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		missing(tb, `OS user "postgres" (PostgreSQL refuses to run as root)`)
		return nil
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		tb.Fatalf("testbroker: user postgres: uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// reachable fails unless the user of cred can search dir and every parent
// of it: a data directory under a root-only 0700 directory cannot be used.
func reachable(dir string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0 ||
			(st.Uid == cred.Uid && mode&0o100 != 0) ||
			(st.Gid == cred.Gid && mode&0o010 != 0)
		if !ok {
			return fmt.Errorf("user postgres cannot reach %s (mode %v): set TMPDIR to a directory it can", d, mode)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

func chownTo(path string, cred *syscall.Credential) error {
	if cred == nil {
		return nil
	}
	return os.Lchown(path, int(cred.Uid), int(cred.Gid))
}

// copyTree copies the directory src to dst (which must not exist), keeping
// the permission bits, owned by the user of cred. It leaves out the symbolic
// link at skip (relative to src), and fails on any other.
func copyTree(src, dst string, cred *syscall.Credential, skip string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if rel == skip && d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		target := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			err = os.Mkdir(target, fi.Mode().Perm())
		case fi.Mode().IsRegular():
			err = copyRegular(path, target, fi.Mode().Perm())
		default:
			return fmt.Errorf("%s: not a regular file or directory", path)
		}
		if err != nil {
			return err
		}
		return chownTo(target, cred)
	})
}

func copyRegular(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
