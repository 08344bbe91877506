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
// 16,384 200-byte incident updates of the feed's shape, with a million keys
// in the window. The test binary is built once, before any timer. Its rate
// is the benchmark's own; the CPU time of the process, start included, would
// not compare with the in-process rows', so none is given.
type engineBench struct {
	dir  string // where the binary goes; the caller removes it
	once sync.Once
	bin  string
	err  error
}

func (e *engineBench) build(h *harness) string {
	e.once.Do(func() {
		out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/replayguard/replayguard").Output()
		if err != nil {
			e.err = fmt.Errorf("go list -m github.com/replayguard/replayguard: %v", err)
			return
		}
		dir := strings.TrimSpace(string(out))
		e.bin = filepath.Join(e.dir, "engine.test")
		cmd := exec.Command("go", "test", "-c", "-o", e.bin, "./engine")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			e.err = fmt.Errorf("go test -c ./engine: %v\n%s", err, out)
		}
	})
	if e.err != nil {
		h.Fatal(e.err)
	}
	return e.bin
}

// run runs BenchmarkDecodeDecide for n iterations on one core.
func (e *engineBench) run(h *harness, n int) result {
	bin := e.build(h)
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
