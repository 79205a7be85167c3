package main

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// harness is the testing.TB that test/framework's Stack and helpers take,
// outside of a test: Fatal aborts the run (run recovers it), Cleanup
// registers a function that runs when the run ends, last first, and a
// failed run keeps the stack's logs (framework.KeptDir) and says where.
// Methods the framework does not call are left to the embedded nil TB (they
// would panic).
type harness struct {
	testing.TB

	mu       sync.Mutex
	cleanups []func()
	failed   bool
}

// fatal is the panic value of harness.Fatal.
type fatal struct{ msg string }

func (h *harness) Helper()      {}
func (h *harness) Name() string { return "bench-rollout" }

func (h *harness) Log(args ...any)                 { say("%s", fmt.Sprint(args...)) }
func (h *harness) Logf(format string, args ...any) { say(format, args...) }

func (h *harness) Fail() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failed = true
}

func (h *harness) Failed() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failed
}

func (h *harness) Error(args ...any) { h.Fail(); h.Log(args...) }

func (h *harness) Errorf(format string, args ...any) { h.Fail(); h.Logf(format, args...) }

func (h *harness) FailNow() { h.Fatal("FailNow") }

func (h *harness) Fatal(args ...any) {
	h.Fail()
	panic(fatal{fmt.Sprint(args...)})
}

func (h *harness) Fatalf(format string, args ...any) {
	h.Fail()
	panic(fatal{fmt.Sprintf(format, args...)})
}

func (h *harness) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

// finish runs the cleanups, last registered first.
func (h *harness) finish() {
	h.mu.Lock()
	fns := h.cleanups
	h.cleanups = nil
	h.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

// guard runs fn, turning a harness Fatal into an error, and runs the
// cleanups afterwards; an error marks the run failed first, so that the
// logs are kept.
func (h *harness) guard(fn func() error) (err error) {
	defer h.finish()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				h.Fail()
				panic(r)
			}
			err = errors.New(f.msg)
		}
		if err != nil {
			h.Fail()
		}
	}()
	return fn()
}
