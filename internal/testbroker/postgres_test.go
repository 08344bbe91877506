package testbroker_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replayguard/replayguard/internal/testbroker"
)

func connect(t *testing.T, p *testbroker.Postgres) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func exec(t *testing.T, conn *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func show(t *testing.T, conn *pgx.Conn, name string) string {
	t.Helper()
	var v string
	if err := conn.QueryRow(context.Background(), "SHOW "+name).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", name, err)
	}
	return v
}

// alive reports whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := bytes.Fields(b[bytes.LastIndexByte(b, ')')+1:])
	return len(f) > 0 && string(f[0]) != "Z" && string(f[0]) != "X"
}

// sysvShmExists reports whether the System V shared memory segment id is
// there.
func sysvShmExists(t *testing.T, id string) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/sysvipc/shm")
	if err != nil {
		t.Skipf("no /proc/sysvipc/shm: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 1 && f[1] == id {
			return true
		}
	}
	return false
}

func TestPostgres(t *testing.T) {
	t.Run("a committed row survives a crash", func(t *testing.T) {
		start := time.Now()
		p := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		t.Logf("started in %v", time.Since(start).Round(time.Millisecond))
		conn := connect(t, p)
		exec(t, conn, "CREATE TABLE k (id text PRIMARY KEY, v int NOT NULL)")
		exec(t, conn, "INSERT INTO k VALUES ($1, $2)", "a", 1)
		var backend int
		if err := conn.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&backend); err != nil {
			t.Fatal(err)
		}

		port := p.Port()
		p.Kill()
		if p.Running() {
			t.Fatal("running after Kill")
		}
		if alive(backend) {
			t.Fatalf("backend %d outlived Kill", backend)
		}
		start = time.Now()
		p.Restart()
		t.Logf("crash recovery and restart in %v", time.Since(start).Round(time.Millisecond))
		if p.Port() != port {
			t.Fatalf("restarted on port %d, want %d", p.Port(), port)
		}
		var v int
		err := connect(t, p).QueryRow(context.Background(), "SELECT v FROM k WHERE id = 'a'").Scan(&v)
		if err != nil || v != 1 {
			t.Fatalf("after a crash: v = %d, %v; want the committed 1", v, err)
		}
		if _, err := conn.Exec(context.Background(), "SELECT 1"); err == nil {
			t.Error("a connection to the killed server still works")
		}
	})

	var shmid string
	t.Run("a server killed at the end of a test leaves no shared memory", func(t *testing.T) {
		p := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		p.Kill()
		b, err := os.ReadFile(filepath.Join(p.DataDir(), "postmaster.pid"))
		lines := strings.Split(string(b), "\n")
		if err != nil || len(lines) < 7 || len(strings.Fields(lines[6])) != 2 {
			t.Fatalf("postmaster.pid of a killed server: %q, %v", b, err)
		}
		shmid = strings.Fields(lines[6])[1]
		if !sysvShmExists(t, shmid) {
			t.Fatalf("segment %s gone before cleanup: nothing is tested", shmid)
		}
	})
	if shmid != "" && sysvShmExists(t, shmid) {
		t.Errorf("System V segment %s left after cleanup", shmid)
	}

	t.Run("the default configuration is the durable one", func(t *testing.T) {
		p := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		conn := connect(t, p)
		for name, want := range map[string]string{
			"synchronous_commit": "on",
			"fsync":              "on",
			"listen_addresses":   "127.0.0.1",
			"data_directory":     p.DataDir(),
			// Not in /dev/shm, where a killed server's segments would stay.
			"dynamic_shared_memory_type": "mmap",
		} {
			if got := show(t, conn, name); got != want {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		want := "postgres://postgres@" + p.Addr() + "/postgres?sslmode=disable"
		if p.URL() != want {
			t.Errorf("URL() = %q, want %q", p.URL(), want)
		}
	})

	t.Run("Settings give the setting a store must refuse", func(t *testing.T) {
		p := testbroker.StartPostgres(t, testbroker.PostgresOptions{Settings: []string{"synchronous_commit=off"}})
		if got := show(t, connect(t, p), "synchronous_commit"); got != "off" {
			t.Fatalf("synchronous_commit = %q, want off", got)
		}
	})

	t.Run("a clean stop and restart keeps the data", func(t *testing.T) {
		p := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		conn := connect(t, p)
		exec(t, conn, "CREATE TABLE k (id int PRIMARY KEY)")
		exec(t, conn, "INSERT INTO k SELECT generate_series(1, 100)")
		p.Restart() // SIGINT, a fast shutdown, then the same directory and port
		var n int
		if err := connect(t, p).QueryRow(context.Background(), "SELECT count(*) FROM k").Scan(&n); err != nil || n != 100 {
			t.Fatalf("after a restart: %d rows, %v; want 100", n, err)
		}
	})

	t.Run("a paused server answers nothing until resumed", func(t *testing.T) {
		p := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		conn := connect(t, p)
		p.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := conn.Exec(ctx, "SELECT 1")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("paused server: %v, want a timeout", err)
		}
		p.Resume()
		var one int
		if err := connect(t, p).QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil {
			t.Fatalf("resumed server: %v", err)
		}
	})

	t.Run("each server has a data directory of its own", func(t *testing.T) {
		a := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		b := testbroker.StartPostgres(t, testbroker.PostgresOptions{})
		exec(t, connect(t, a), "CREATE TABLE only_in_a (id int)")
		var n int
		err := connect(t, b).QueryRow(context.Background(),
			"SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n)
		if err != nil || n != 0 {
			t.Fatalf("b sees %d tables of a, %v", n, err)
		}
	})
}
