package poll

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Until calls cond at once and then every interval until it returns nil or
// timeout has passed. It returns how long that took and nil, or, on timeout,
// cond's last error.
func Until(timeout, interval time.Duration, cond func() error) (time.Duration, error) {
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		last = cond()
		return last == nil, nil
	})
	if err == nil {
		return time.Since(start), nil
	}
	if last == nil {
		last = err
	}
	return time.Since(start), last
}

// Eventually is Until that fails the test on timeout, naming what it waited
// for and cond's last error. It returns how long cond took to hold.
func Eventually(t testing.TB, timeout, interval time.Duration, what string, cond func() error) time.Duration {
	t.Helper()
	took, err := Until(timeout, interval, cond)
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
	}
	return took
}
