package pubsub_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/pubsub"
)

// TestListenPayload: a payload listener is subscribed when ListenPayload
// returns, gets each message's payload in order and takes no wake-up from
// the channel's waiters; after a lost connection its onMissed is called;
// after Leave it gets nothing.
func TestListenPayload(t *testing.T) {
	srv := redistest.Start(t)
	c := srv.Client(t)
	h := newHub(t, srv.Client(t), pubsub.Options{Policy: policy})
	var mu sync.Mutex
	var got []string
	missed := make(chan struct{}, 1)
	l, err := h.ListenPayload(t.Context(), "payload", func(p string) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	}, func() {
		select {
		case missed <- struct{}{}:
		default:
		}
	})
	require.NoError(t, err)
	w := subscribe(t, h, "payload")
	publish(t, c, "payload", "one")
	publish(t, c, "payload", "two")
	woken(t, w, "the waiter") // the listener took no wake-up of it
	barrier(t, h, c)
	mu.Lock()
	assert.Equal(t, []string{"one", "two"}, got, "payloads")
	mu.Unlock()
	select {
	case <-missed:
		t.Fatal("onMissed called at the first subscription")
	default:
	}

	require.NoError(t, do(t, c, "CLIENT", "KILL", "TYPE", "pubsub").Error())
	relocktest.Receive(t, missed, eventTimeout, "onMissed after the connection was lost")

	l.Leave(false)
	w.Leave(false)
	publish(t, c, "payload", "three")
	barrier(t, h, c)
	mu.Lock()
	assert.Equal(t, []string{"one", "two"}, got, "payloads after Leave")
	mu.Unlock()
}
