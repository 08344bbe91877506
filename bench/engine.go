package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// engineBench is the engine's own BenchmarkDecodeDecide (engine/bench_test.go):
// decode and decide without the audit record or a store, on its own ring of
// 16,384 200-byte incident updates, reused: its key window (room for a
// million keys) starts empty, and past the ring's first pass every message
// is one already applied, decided a duplicate — unlike the feed, whose
// replays are about one delivery in ten. The test binary is built once,
// before any timer. Its rate is the benchmark's own; the CPU time of the
// process, start included, would not compare with the in-process rows', so
// none is given.
type engineBench struct{ bin built }

// built is a binary of replayguard's module, built once, before any timer,
// into dir (which the caller removes).
type built struct {
	dir  string
	once sync.Once
	path string
	err  error
}

// get builds the binary named name the first time, with the go command's
// args (a subcommand, its flags and packages) run in replayguard's module
// directory, and returns its path.
func (b *built) get(h *harness, name string, args ...string) string {
	b.once.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/replayguard/replayguard").Output()
		if err != nil {
			b.err = fmt.Errorf("go list -m github.com/replayguard/replayguard: %v", err)
			return
		}
		b.path = filepath.Join(b.dir, name)
		// -o after the subcommand, before the packages.
		cmd := exec.Command("go", append([]string{args[0], "-o", b.path}, args[1:]...)...)
		cmd.Dir = strings.TrimSpace(string(out))
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if b.err != nil {
		h.Fatal(b.err)
	}
	return b.path
}

// run runs BenchmarkDecodeDecide for n iterations on one core.
func (e *engineBench) run(h *harness, n int) result {
	bin := e.bin.get(h, "engine.test", "test", "-c", "./engine")
	out, err := exec.Command(bin, "-test.run", "^$", "-test.bench", "^BenchmarkDecodeDecide$",
		"-test.benchtime", fmt.Sprintf("%dx", n), "-test.cpu", "1", "-test.count", "1").CombinedOutput()
	if err != nil {
		h.Fatalf("BenchmarkDecodeDecide: %v\n%s", err, out)
	}
	f := strings.Fields(string(out))
	for i := 1; i < len(f); i++ {
		if f[i] == "msgs/s" {
			r, err := strconv.ParseFloat(f[i-1], 64)
			if err != nil {
				h.Fatalf("BenchmarkDecodeDecide: %q: %v", f[i-1], err)
			}
			return result{rate: r}
		}
	}
	h.Fatalf("BenchmarkDecodeDecide printed no msgs/s:\n%s", out)
	return result{}
}
