package redissontest

import (
	"context"
	"sync"
	"time"
)

// semaphore is a counting semaphore with Java's java.util.concurrent
// Semaphore behaviour where Redisson relies on it: it starts with no
// permits, a release without waiters leaves a permit for the next
// acquire, waiters are served first come first served, and the number of
// queued waiters can be read (getQueueLength).
type semaphore struct {
	mu      sync.Mutex
	permits int
	queue   []chan struct{}
}

// release adds n permits and hands them to queued waiters.
func (s *semaphore) release(n int) {
	if n <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.permits += n
	for s.permits > 0 && len(s.queue) > 0 {
		close(s.queue[0])
		s.queue = s.queue[1:]
		s.permits--
	}
}

// queueLength is the number of waiters queued.
func (s *semaphore) queueLength() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// tryAcquire takes a permit, waiting up to d for one (d < 0: without a
// limit; d == 0: not at all) or until ctx ends. It reports whether it
// took one.
func (s *semaphore) tryAcquire(ctx context.Context, d time.Duration) bool {
	s.mu.Lock()
	if s.permits > 0 && len(s.queue) == 0 {
		s.permits--
		s.mu.Unlock()
		return true
	}
	if d == 0 {
		s.mu.Unlock()
		return false
	}
	ch := make(chan struct{})
	s.queue = append(s.queue, ch)
	s.mu.Unlock()
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-ch:
		return true
	case <-timeout:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, q := range s.queue {
		if q == ch {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return false
		}
	}
	// Granted while giving up: keep it.
	return true
}

// gate is Redisson's ReclosableLatch: closed at first, opened and closed
// again by messages; waiters wait for it to be open.
type gate struct {
	mu      sync.Mutex
	opened  chan struct{} // closed while the gate is open
	isOpen  bool
	waiting int // callers of await that wait on a closed gate
}

func newGate() *gate { return &gate{opened: make(chan struct{})} }

func (g *gate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.isOpen {
		g.isOpen = true
		close(g.opened)
	}
}

func (g *gate) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isOpen {
		g.isOpen = false
		g.opened = make(chan struct{})
	}
}

// sleepers is how many callers of await wait on the gate while it is
// closed.
func (g *gate) sleepers() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.isOpen {
		return 0
	}
	return g.waiting
}

// await waits until the gate is open, up to d (d < 0: without a limit)
// or until ctx ends, and reports whether it was open.
func (g *gate) await(ctx context.Context, d time.Duration) bool {
	g.mu.Lock()
	opened := g.opened
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	var timeout <-chan time.Time
	if d >= 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case <-opened:
		return true
	case <-timeout:
	case <-ctx.Done():
	}
	return false
}
