package pubsub_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// TestPassOnGoesDownTheLine: a waiter that cannot use its wake-up passes it
// to the next waiter after it in arrival order (skipping those with one
// pending), and the newest passes it to nobody: one pass over the line.
func TestPassOnGoesDownTheLine(t *testing.T) {
	srv := redistest.Shared(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	const ch = "passon"
	ws := make([]*pubsub.Waiter, 4)
	for i := range ws {
		ws[i] = subscribe(t, h, ch)
		defer ws[i].Leave(false)
	}
	// Only the third has a wake-up pending.
	publish(t, c, ch, "all")
	barrier(t, h, c)
	for _, i := range []int{0, 1, 3} {
		require.True(t, pending(ws[i]))
	}
	// Now only the third has a wake-up pending.
	ws[0].PassOn()
	assert.True(t, pending(ws[1]), "the first's wake-up passed to the second")
	ws[1].PassOn()
	assert.True(t, pending(ws[3]), "the second's passed past the third, which had one, to the fourth")
	assert.True(t, pending(ws[2]), "the third keeps its own")
	ws[3].PassOn()
	for i, w := range ws {
		assert.False(t, pending(w), "waiter %d woken by the newest's pass", i)
	}
	// A waiter that left passes nothing.
	ws[0].Leave(false)
	ws[0].PassOn()
	for i, w := range ws[1:] {
		assert.False(t, pending(w), "waiter %d woken by a pass after Leave", i+1)
	}
}

// TestHeardTellsMessagesApart: Heard is set by a message that wakes the
// waiter (also one that merges into a pending wake-up), and by nothing
// else: not a wake-up passed on, not a lost connection made again, not
// Close.
func TestHeardTellsMessagesApart(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	const ch = "heard"
	a := subscribe(t, h, ch)
	b := subscribe(t, h, ch)
	defer a.Leave(false)
	defer b.Leave(false)
	assert.False(t, a.Heard(), "before any message")

	publish(t, c, ch, "all")
	barrier(t, h, c)
	assert.True(t, pending(a))
	assert.True(t, a.Heard(), "woken by a message")
	assert.False(t, a.Heard(), "Heard clears itself")
	assert.True(t, pending(b))
	assert.True(t, b.Heard())

	a.PassOn() // a has no wake-up: b gets one, but no message
	assert.True(t, pending(b))
	assert.False(t, b.Heard(), "a wake-up passed on")

	require.NoError(t, do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error())
	woken(t, a, "a")
	woken(t, b, "b")
	assert.False(t, a.Heard(), "woken by a lost connection")
	relocktest.Eventually(t, eventTimeout, "resubscribed", func() bool { return numsub(c, ch) == 1 })
	barrier(t, h, c)
	pending(a) // woken again once resubscribed
	assert.False(t, a.Heard(), "woken by the new subscription")

	publish(t, c, ch, "one")
	barrier(t, h, c)
	assert.True(t, pending(a))
	assert.True(t, a.Heard(), "woken by a message after reconnecting")
}
