package poll

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// failRecorder is a testing.TB that records Fatalf instead of stopping.
type failRecorder struct {
	testing.TB
	failed string
}

func (f *failRecorder) Helper() {}

func (f *failRecorder) Fatalf(format string, args ...any) { f.failed = fmt.Sprintf(format, args...) }

// succeedsOnCall returns a condition that fails until its n-th call (for
// ever when n is 0), each error naming the call.
func succeedsOnCall(n int, calls *int) func() error {
	return func() error {
		*calls++
		if n == 0 || *calls < n {
			return fmt.Errorf("call %d of %d", *calls, n)
		}
		return nil
	}
}

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name               string
		succeedOn          int // the call that first returns nil; 0 for never
		timeout            time.Duration
		wantErr            bool
		minCalls, maxCalls int
	}{
		{name: "a condition that holds at once is called once", succeedOn: 1, timeout: time.Second, minCalls: 1, maxCalls: 1},
		{name: "a condition that holds on the third call is called three times", succeedOn: 3, timeout: time.Second, minCalls: 3, maxCalls: 3},
		{name: "a condition that never holds is retried and its last error returned", timeout: 20 * time.Millisecond, wantErr: true, minCalls: 2, maxCalls: 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			_, err := Until(tc.timeout, time.Millisecond, succeedsOnCall(tc.succeedOn, &calls))
			switch {
			case !tc.wantErr && err != nil:
				t.Errorf("Until() = %v, want nil", err)
			case tc.wantErr && err == nil:
				t.Errorf("Until() = nil, want an error")
			case tc.wantErr && err.Error() != fmt.Sprintf("call %d of 0", calls):
				t.Errorf("Until() = %v, want the last call's error (call %d)", err, calls)
			}
			if calls < tc.minCalls || calls > tc.maxCalls {
				t.Errorf("condition called %d times, want %d to %d", calls, tc.minCalls, tc.maxCalls)
			}
		})
	}
}

func TestEventually(t *testing.T) {
	t.Run("a condition that holds does not fail the test", func(t *testing.T) {
		f := &failRecorder{TB: t}
		calls := 0
		Eventually(f, time.Second, time.Millisecond, "the third call", succeedsOnCall(3, &calls))
		if f.failed != "" {
			t.Errorf("failed: %s", f.failed)
		}
	})
	t.Run("a timeout fails the test naming what it waited for and the last error", func(t *testing.T) {
		f := &failRecorder{TB: t}
		Eventually(f, 10*time.Millisecond, time.Millisecond, "the impossible", func() error { return errors.New("still impossible") })
		for _, want := range []string{"the impossible", "still impossible"} {
			if !strings.Contains(f.failed, want) {
				t.Errorf("failure %q does not say %q", f.failed, want)
			}
		}
	})
}
