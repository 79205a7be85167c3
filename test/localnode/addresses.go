package localnode

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// addresses hands out loopback addresses by pod name. A name keeps its
// address for the node's lifetime, so a recreated pod comes back on the
// same address (and a test can know it before the pod exists); two names
// never share one. Each node holds one block 127.<b>.*.* (b from 0) under an
// flock, so nodes in parallel test processes never collide; block 0 starts at
// 127.0.0.2.
type addresses struct {
	mu     sync.Mutex
	block  int
	next   int
	byName map[string]string
	// busy marks the names held by a live pod worker; a new pod of a name
	// waits in acquire until the previous one has released the address.
	busy map[string]chan struct{}
	lock *os.File
}

// maxBlocks bounds the search for a free block.
const maxBlocks = 64

func newAddresses() (*addresses, error) {
	dir := filepath.Join(os.TempDir(), "nats-operator-localnode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for b := 0; b < maxBlocks; b++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("block-%d.lock", b)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		return &addresses{block: b, next: 2, byName: map[string]string{}, busy: map[string]chan struct{}{}, lock: f}, nil
	}
	return nil, fmt.Errorf("no free address block among %d in %s", maxBlocks, dir)
}

// get returns the address of ns/name, allocating one on first reference.
func (a *addresses) get(ns, name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	key := ns + "/" + name
	if ip, ok := a.byName[key]; ok {
		return ip
	}
	for {
		n := a.next
		a.next++
		c, d := n/256, n%256
		if c > 255 {
			// Exhausted: wrapping would give one address to two names.
			panic(fmt.Sprintf("localnode: more than 65000 pod names in block 127.%d.0.0/16", a.block))
		}
		if d == 0 || d == 255 {
			continue
		}
		ip := fmt.Sprintf("127.%d.%d.%d", a.block, c, d)
		a.byName[key] = ip
		return ip
	}
}

// lookup returns the address of ns/name if one was allocated.
func (a *addresses) lookup(ns, name string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byName[ns+"/"+name]
}

// acquire waits until no other pod worker holds ns/name, then holds it. It
// returns false if stop closes first.
func (a *addresses) acquire(ns, name string, stop <-chan struct{}) bool {
	key := ns + "/" + name
	for {
		a.mu.Lock()
		ch, held := a.busy[key]
		if !held {
			a.busy[key] = make(chan struct{})
			a.mu.Unlock()
			return true
		}
		a.mu.Unlock()
		select {
		case <-ch:
		case <-stop:
			return false
		}
	}
}

// release lets the next pod of ns/name start.
func (a *addresses) release(ns, name string) {
	key := ns + "/" + name
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.busy[key]; ok {
		close(ch)
		delete(a.busy, key)
	}
}

func (a *addresses) close() {
	if a.lock != nil {
		a.lock.Close()
	}
}
