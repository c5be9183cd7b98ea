package realcp

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
)

// skip skips the test with reason, or fails it when RequireEnv is set.
func skip(tb testing.TB, format string, args ...any) {
	tb.Helper()
	if os.Getenv(RequireEnv) != "" {
		tb.Fatalf("%s is set, so this test must not skip: "+format, append([]any{RequireEnv}, args...)...)
	}
	tb.Skipf(format, args...)
}

// Require skips the test, naming the command that builds them, when the
// binaries are not built (fails it when RequireEnv is set). Under the race
// detector it always skips: these tests run in make test, and the code
// they drive runs under -race in the fake-API tests; here they would only
// repeat the control plane's waits (minutes of CI).
func Require(tb testing.TB) {
	tb.Helper()
	if raceEnabled {
		tb.Skip("the real control plane's tests run without -race (make test)")
	}
	if _, err := findBinaries(); err != nil {
		skip(tb, "needs the real control plane: %v", err)
	}
}

// StartPrivate starts a control plane of the test's own, stopped when the
// test ends: for a test that kills or restarts a piece of it, or needs
// other flags (opts; its Dir is ignored).
func StartPrivate(tb testing.TB, opts Options) *ControlPlane {
	tb.Helper()
	Require(tb)
	opts.Dir = ""
	cp, err := Start(context.Background(), opts)
	if err != nil {
		tb.Fatalf("start the control plane: %v", err)
	}
	tb.Cleanup(cp.Stop)
	return cp
}

// Lazy is one control plane shared by the tests of a test binary, started
// by the first that asks (Get) and stopped by StopAfter. Tests share it
// one at a time, each in its own Namespace.
type Lazy struct {
	once sync.Once
	cp   *ControlPlane
	err  error
}

// Get returns the shared control plane, starting it on the first call. It
// skips the test when the binaries are not built (Require).
func (l *Lazy) Get(tb testing.TB) *ControlPlane {
	tb.Helper()
	Require(tb)
	l.once.Do(func() { l.cp, l.err = Start(context.Background(), Options{}) })
	if errors.Is(l.err, ErrNoBinaries) {
		skip(tb, "needs the real control plane: %v", l.err)
	}
	if l.err != nil {
		tb.Fatalf("start the control plane: %v", l.err)
	}
	return l.cp
}

// Stop stops the control plane if one was started.
func (l *Lazy) Stop() {
	if l.cp != nil {
		l.cp.Stop()
	}
}

// Runner is what TestMain runs: *testing.M.
type Runner interface{ Run() int }

type stopAfter struct {
	m Runner
	l *Lazy
}

func (s stopAfter) Run() int {
	defer s.l.Stop()
	return s.m.Run()
}

// StopAfter wraps m so that the shared control plane stops after the
// tests: TestMain calls StopAfter(m, &plane).Run() (or hands it on to a
// wrapper such as kerneltest.Main).
func StopAfter(m Runner, l *Lazy) Runner { return stopAfter{m, l} }
