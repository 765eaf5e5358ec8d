package redissontest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/internal/relocktest"
)

// TestSemaphoreJavaSemantics: a release with nobody waiting leaves a
// permit; waiters are served in order; a timed acquire gives up.
func TestSemaphoreJavaSemantics(t *testing.T) {
	var s semaphore
	assert.False(t, s.tryAcquire(t.Context(), 0), "no permit at first")
	s.release(1)
	assert.True(t, s.tryAcquire(t.Context(), 0), "a permit left by a release without waiters")
	assert.False(t, s.tryAcquire(t.Context(), 10*time.Millisecond), "timed acquire gives up")

	got := make(chan int, 2)
	for i := range 2 {
		go func() {
			if s.tryAcquire(t.Context(), -1) {
				got <- i
			}
		}()
		relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("waiter %d to queue", i), func() bool { return s.queueLength() == i+1 })
	}
	s.release(s.queueLength())
	first := relocktest.Receive(t, got, 5*time.Second, "the first queued waiter to go on")
	second := relocktest.Receive(t, got, 5*time.Second, "the second queued waiter to go on")
	assert.ElementsMatch(t, []int{0, 1}, []int{first, second}, "release(queueLength) lets every queued waiter go")
	assert.False(t, s.tryAcquire(t.Context(), 0), "no permit left over")

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	assert.False(t, s.tryAcquire(ctx, -1), "an ended context ends the wait")
	assert.Zero(t, s.queueLength())
}

// TestGate: closed at first, opened and closed again.
func TestGate(t *testing.T) {
	g := newGate()
	assert.False(t, g.await(t.Context(), 0), "closed at first")
	g.open()
	assert.True(t, g.await(t.Context(), -1), "open")
	g.close()
	assert.False(t, g.await(t.Context(), 5*time.Millisecond), "closed again")
	done := make(chan bool, 1)
	go func() { done <- g.await(t.Context(), -1) }()
	g.open()
	assert.True(t, relocktest.Receive(t, done, 5*time.Second, "the waiter to go on when the gate opens"), "a waiter goes on when the gate opens")
}
