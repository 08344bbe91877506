package main

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// harness is the testing.TB that internal/testbroker's helpers are given
// outside a test: a failure ends the measurement it happened in (Fatal
// panics with a failure that measure recovers; Error fails it when it
// ends), cleanups and temporary
// directories go when the measurement ends. The helpers call only the
// methods defined here; the embedded interface is nil.
type harness struct {
	testing.TB
	name     string
	cleanups []func()
	failed   bool
	logs     []string
}

// failure is the panic value of harness.Fatal.
type failure string

func (h *harness) Helper()                   {}
func (h *harness) Name() string              { return h.name }
func (h *harness) Cleanup(f func())          { h.cleanups = append(h.cleanups, f) }
func (h *harness) Failed() bool              { return h.failed }
func (h *harness) Fail()                     { h.failed = true }
func (h *harness) FailNow()                  { h.Fatal("failed") }
func (h *harness) Log(args ...any)           { h.logs = append(h.logs, fmt.Sprint(args...)) }
func (h *harness) Logf(f string, a ...any)   { h.logs = append(h.logs, fmt.Sprintf(f, a...)) }
func (h *harness) Error(args ...any)         { h.failed = true; h.Log(args...) }
func (h *harness) Errorf(f string, a ...any) { h.failed = true; h.Logf(f, a...) }
func (h *harness) Fatal(args ...any)         { h.failed = true; panic(failure(fmt.Sprint(args...))) }
func (h *harness) Fatalf(f string, a ...any) {
	h.failed = true
	panic(failure(fmt.Sprintf(f, a...)))
}
func (h *harness) Skip(args ...any)         { h.Fatal(args...) }
func (h *harness) Skipf(f string, a ...any) { h.Fatalf(f, a...) }
func (h *harness) SkipNow()                 { h.Fatal("skipped") }

// TempDir returns a new directory removed when the measurement ends.
func (h *harness) TempDir() string {
	dir, err := os.MkdirTemp("", "replayguard-peers-")
	if err != nil {
		h.Fatal(err)
	}
	h.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// finish runs the cleanups, last first, and returns the first failure
// one of them raised.
func (h *harness) finish() (err failure) {
	for _, f := range slices.Backward(h.cleanups) {
		func() {
			defer func() {
				if r := recover(); r != nil && err == "" {
					err = failure(fmt.Sprint("cleanup: ", r))
				}
			}()
			f()
		}()
	}
	h.cleanups = nil
	return err
}

// measure runs f with a harness of its own and returns its result, or the
// failure that ended it as the result's error.
func measure(name string, f func(h *harness) result) (res result) {
	h := &harness{name: name}
	defer func() {
		r := recover()
		if cerr := h.finish(); r == nil && cerr != "" {
			r = cerr
		}
		if r == nil && h.failed { // Error, Errorf or Fail: the round went wrong without ending
			r = failure("failed: " + strings.Join(h.logs, "; "))
		}
		if r == nil {
			return
		}
		fl, ok := r.(failure)
		if !ok {
			panic(r)
		}
		res = result{err: string(fl)}
	}()
	return f(h)
}
