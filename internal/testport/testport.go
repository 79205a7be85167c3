package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// The range ports are drawn from: below the kernel's ephemeral range (32768
// and up on Linux by default) and above the well-known and most registered
// service ports.
const (
	low  = 20000
	high = 32000
)

var (
	mu    sync.Mutex
	taken = map[string]bool{}
)

// Pick returns a port on host that was free a moment ago and that this
// process has not handed out before.
func Pick(host string) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		p := low + rand.IntN(high-low)
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		if taken[addr] {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		l.Close()
		taken[addr] = true
		return p, nil
	}
	return 0, fmt.Errorf("no free port on %s between %d and %d", host, low, high)
}

// Free is Pick for a test: it fails the test when no port is free.
func Free(t testing.TB, host string) int {
	t.Helper()
	p, err := Pick(host)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
