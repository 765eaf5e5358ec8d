package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/handle"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// nextEvent returns the watcher's next event, failing the test when none
// comes within 5s.
func nextEvent(t *testing.T, w *handle.Watcher) handle.Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		require.True(t, ok, "the watcher's events ended")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event from the watcher within 5s")
		return handle.Event{}
	}
}

// expectEvents checks that the watcher's next events are want (their
// type, owner, client and side), in order.
func expectEvents(t *testing.T, w *handle.Watcher, want ...handle.Event) {
	t.Helper()
	for i, ev := range want {
		got := nextEvent(t, w)
		assert.Equal(t, ev.Type, got.Type, "event %d's type (%+v)", i, got)
		assert.Equal(t, ev.Owner, got.Owner, "event %d's owner (%+v)", i, got)
		assert.Equal(t, ev.ClientID, got.ClientID, "event %d's client (%+v)", i, got)
		assert.Equal(t, ev.Write, got.Write, "event %d's write (%+v)", i, got)
		assert.False(t, got.At.IsZero(), "event %d's time", i)
	}
}

// keyspaceServer is a redis-server that sends the keyspace notifications
// a watch needs.
func keyspaceServer(t *testing.T) *redistest.Server {
	return redistest.Start(t, "--notify-keyspace-events", "Khgx")
}

// TestWatchLock: with keyspace notifications, a watcher of a plain lock
// that it does not hold hears another Client's acquisition, re-entries
// not at all, its release, a hold that expires, and a force-unlock.
func TestWatchLock(t *testing.T) {
	srv := keyspaceServer(t)
	c := relocktest.ClientOn(t, srv)
	other := relocktest.ClientOn(t, srv)
	name := relocktest.Name(t)
	ctx := rlock.WithOwner(t.Context(), "a")

	w, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err, "Watch")
	defer w.Stop()
	assert.True(t, w.KeyspaceEvents(), "KeyspaceEvents with notify-keyspace-events Khgx")

	l := other.GetLock(name)
	require.NoError(t, l.Lock(ctx))
	expectEvents(t, w, handle.Event{Type: handle.Acquired, Owner: "a", ClientID: other.ID()})
	require.NoError(t, l.Lock(ctx), "re-entry")
	require.NoError(t, l.Unlock(ctx), "partial release")
	require.NoError(t, l.Unlock(ctx))
	expectEvents(t, w, handle.Event{Type: handle.Released, Owner: "a", ClientID: other.ID()})

	require.NoError(t, l.LockLease(rlock.WithOwner(t.Context(), "b"), 30*time.Millisecond))
	expectEvents(t, w,
		handle.Event{Type: handle.Acquired, Owner: "b", ClientID: other.ID()},
		handle.Event{Type: handle.Expired, Owner: "b", ClientID: other.ID()})

	require.NoError(t, l.Lock(ctx))
	expectEvents(t, w, handle.Event{Type: handle.Acquired, Owner: "a", ClientID: other.ID()})
	forced, err := c.GetLock(name).ForceUnlock(t.Context())
	require.NoError(t, err)
	require.True(t, forced)
	expectEvents(t, w, handle.Event{Type: handle.Released, Owner: "a", ClientID: other.ID()})
}

// TestWatchNoKeyspace: without keyspace notifications (the server's
// default), a watcher says so, hears releases only, and changes nothing
// in the server's configuration.
func TestWatchNoKeyspace(t *testing.T) {
	srv := redistest.Start(t)
	c := relocktest.ClientOn(t, srv)
	raw := srv.Client(t)
	name := relocktest.Name(t)
	ctx := rlock.WithOwner(t.Context(), "a")

	w, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err, "Watch")
	defer w.Stop()
	assert.False(t, w.KeyspaceEvents(), "KeyspaceEvents with notifications off")

	l := c.GetLock(name)
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Unlock(ctx))
	// The acquisition was not heard, so the release's holder is unknown.
	expectEvents(t, w, handle.Event{Type: handle.Released})

	// A hold that expires unheard is found gone at the next release
	// heard, which a holder taken after it makes.
	require.NoError(t, l.LockLease(ctx, 20*time.Millisecond))
	relocktest.Eventually(t, 5*time.Second, "the lease to end", func() bool {
		locked, err := l.IsLocked(t.Context())
		return err == nil && !locked
	})
	require.NoError(t, l.Lock(rlock.WithOwner(t.Context(), "b")))
	require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "b")))
	expectEvents(t, w, handle.Event{Type: handle.Released})

	flags, err := raw.Do(t.Context(), raw.B().ConfigGet().Parameter("notify-keyspace-events").Build()).AsStrMap()
	require.NoError(t, err)
	assert.Equal(t, "", flags["notify-keyspace-events"], "the server's notify-keyspace-events after a watch")
}

// TestWatchKinds: fenced, spin, fair and read-write locks are watched as
// the plain lock is; both sides of a read-write lock see both kinds of
// hold.
func TestWatchKinds(t *testing.T) {
	srv := keyspaceServer(t)
	c := relocktest.ClientOn(t, srv)
	other := relocktest.ClientOn(t, srv)
	ctx := rlock.WithOwner(t.Context(), "a")
	type lock interface {
		Lock(context.Context) error
		Unlock(context.Context) error
		Watch(context.Context) (*handle.Watcher, error)
	}
	for _, tc := range []struct {
		kind        string
		get         func(c *rlock.Client, name string) lock
		write, read bool
	}{
		{"fenced", func(c *rlock.Client, name string) lock { return c.GetFencedLock(name) }, false, false},
		{"spin", func(c *rlock.Client, name string) lock { return c.GetSpinLock(name) }, false, false},
		{"fair", func(c *rlock.Client, name string) lock { return c.GetFairLock(name) }, false, false},
		{"write", func(c *rlock.Client, name string) lock { return c.GetReadWriteLock(name).WriteLock() }, true, false},
		{"read", func(c *rlock.Client, name string) lock { return c.GetReadWriteLock(name).ReadLock() }, false, true},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			name := relocktest.Name(t)
			w, err := tc.get(c, name).Watch(t.Context())
			require.NoError(t, err, "Watch")
			defer w.Stop()
			l := tc.get(other, name)
			require.NoError(t, l.Lock(ctx))
			expectEvents(t, w, handle.Event{Type: handle.Acquired, Owner: "a", ClientID: other.ID(), Write: tc.write})
			require.NoError(t, l.Unlock(ctx))
			expectEvents(t, w, handle.Event{Type: handle.Released, Owner: "a", ClientID: other.ID(), Write: tc.write})
			if tc.read {
				// The read side's watcher sees a write hold too.
				wl := other.GetReadWriteLock(name).WriteLock()
				require.NoError(t, wl.Lock(ctx))
				expectEvents(t, w, handle.Event{Type: handle.Acquired, Owner: "a", ClientID: other.ID(), Write: true})
				require.NoError(t, wl.Unlock(ctx))
				expectEvents(t, w, handle.Event{Type: handle.Released, Owner: "a", ClientID: other.ID(), Write: true})
			}
		})
	}
}

// TestWatchHandOver: a holder that leaves and another that takes the lock
// at once are both reported, the leaver first.
func TestWatchHandOver(t *testing.T) {
	srv := keyspaceServer(t)
	c := relocktest.ClientOn(t, srv)
	name := relocktest.Name(t)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	l := c.GetLock(name)
	require.NoError(t, l.Lock(a))
	w, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err, "Watch")
	defer w.Stop()
	got := make(chan error, 1)
	go func() { got <- l.Lock(b) }()
	relocktest.Eventually(t, 5*time.Second, "b to wait", func() bool {
		return relocktest.Subscribers(srv.Client(t), layout.Channel(name)) > 0
	})
	require.NoError(t, l.Unlock(a))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "b's Lock"))
	ev := nextEvent(t, w)
	assert.Equal(t, handle.Released, ev.Type, "first event %+v", ev)
	assert.Equal(t, "a", ev.Owner, "first event %+v", ev)
	ev = nextEvent(t, w)
	assert.Equal(t, handle.Acquired, ev.Type, "second event %+v", ev)
	assert.Equal(t, "b", ev.Owner, "second event %+v", ev)
	require.NoError(t, l.Unlock(b))
}

// TestWatchEnds: a watch ends, closing Events, when its context ends, at
// Stop (twice is fine), and at the Client's Close; after it ends its
// subscriptions go, and a watch of a closed Client, of a bad name, or
// with an ended context is refused.
func TestWatchEnds(t *testing.T) {
	srv := keyspaceServer(t)
	c := relocktest.ClientOn(t, srv)
	name := relocktest.Name(t)

	ctx, cancel := context.WithCancel(t.Context())
	w, err := c.GetLock(name).Watch(ctx)
	require.NoError(t, err)
	cancel()
	relocktest.Receive(t, closedEvents(w), 5*time.Second, "Events closed after ctx ended")

	w, err = c.GetLock(name).Watch(t.Context())
	require.NoError(t, err)
	w.Stop()
	w.Stop()
	_, open := <-w.Events()
	assert.False(t, open, "Events after Stop")

	// A watcher whose events nobody reads still ends at Close. (The
	// Client is closed by the test alone: a Close that hangs fails it.)
	c, err = rlock.NewClient(srv.ClientOption())
	require.NoError(t, err)
	w, err = c.GetLock(name).Watch(t.Context())
	require.NoError(t, err)
	for i := range 40 {
		o := rlock.WithOwner(t.Context(), "x")
		require.NoError(t, c.GetLock(name).Lock(o), "Lock #%d", i)
		require.NoError(t, c.GetLock(name).Unlock(o), "Unlock #%d", i)
	}
	w2, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err)
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	require.NoError(t, relocktest.Receive(t, closed, 5*time.Second, "Close with a watcher nobody reads"))
	for _, w := range []*handle.Watcher{w, w2} {
		relocktest.Receive(t, closedEvents(w), 5*time.Second, "Events closed after Close")
	}
	_, err = c.GetLock(name).Watch(t.Context())
	require.ErrorIs(t, err, rlock.ErrClosed, "Watch after Close")

	c = relocktest.ClientOn(t, srv)
	_, err = c.GetLock("").Watch(t.Context())
	require.ErrorIs(t, err, rlock.ErrInvalidArgument, "Watch of an empty name")
	_, err = c.GetLock(name).Watch(ctx)
	require.ErrorIs(t, err, context.Canceled, "Watch with an ended context")
}

// closedEvents returns a channel closed once w's Events is closed (its
// remaining events drained).
func closedEvents(w *handle.Watcher) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range w.Events() {
		}
		close(done)
	}()
	return done
}

// TestWatchReconnect: a holder that leaves while the watcher's
// subscription connection is down is found gone when it is back
// (vanished: neither its release nor its expiry was heard).
func TestWatchReconnect(t *testing.T) {
	srv := keyspaceServer(t)
	opt := srv.ClientOption()
	opt.ClientName = "watcher"
	c, err := rlock.NewClient(opt)
	require.NoError(t, err)
	defer c.Close()
	other := relocktest.ClientOn(t, srv)
	raw := srv.Client(t)
	name := relocktest.Name(t)
	ctx := rlock.WithOwner(t.Context(), "a")

	w, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, other.GetLock(name).Lock(ctx))
	expectEvents(t, w, handle.Event{Type: handle.Acquired, Owner: "a", ClientID: other.ID()})

	// Cut the watcher's connections and release at once: the release is
	// heard if the subscription is back first, else the watcher finds
	// the holder gone when it is back.
	require.Positive(t, relocktest.KillConnections(t, raw, "watcher"), "connections of the watcher")
	require.NoError(t, other.GetLock(name).Unlock(ctx))
	ev := nextEvent(t, w)
	assert.Contains(t, []handle.EventType{handle.Vanished, handle.Released}, ev.Type, "event %+v", ev)
	assert.Equal(t, "a", ev.Owner, "event %+v", ev)
}

// TestWatchVanished: a hold that expires while the server sends hash
// notifications but not expiries is found gone at the next change heard,
// as vanished.
func TestWatchVanished(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "Kh")
	c := relocktest.ClientOn(t, srv)
	name := relocktest.Name(t)
	w, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err)
	defer w.Stop()
	assert.False(t, w.KeyspaceEvents(), "KeyspaceEvents without expiry notifications")
	l := c.GetLock(name)
	a, b := rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	require.NoError(t, l.LockLease(a, 20*time.Millisecond))
	expectEvents(t, w, handle.Event{Type: handle.Acquired, Owner: "a", ClientID: c.ID()})
	require.NoError(t, l.Lock(b)) // waits out a's lease
	expectEvents(t, w,
		handle.Event{Type: handle.Vanished, Owner: "a", ClientID: c.ID()},
		handle.Event{Type: handle.Acquired, Owner: "b", ClientID: c.ID()})
	require.NoError(t, l.Unlock(b))
	expectEvents(t, w, handle.Event{Type: handle.Released, Owner: "b", ClientID: c.ID()})
}

// TestWatchKeyspaceRefused: a Client whose ACL refuses the keyspace
// channel still watches, hearing releases only, and says so.
func TestWatchKeyspaceRefused(t *testing.T) {
	srv := keyspaceServer(t)
	raw := srv.Client(t)
	require.NoError(t, raw.Do(t.Context(), raw.B().Arbitrary("ACL", "SETUSER", "watcher", "on", ">pw", "~*",
		"resetchannels", "&redisson_*", "+@all").Build()).Error())
	opt := srv.ClientOption()
	opt.Username, opt.Password = "watcher", "pw"
	c, err := rlock.NewClient(opt)
	require.NoError(t, err)
	defer c.Close()
	name := relocktest.Name(t)
	w, err := c.GetLock(name).Watch(t.Context())
	require.NoError(t, err, "Watch with the keyspace channel refused")
	defer w.Stop()
	assert.False(t, w.KeyspaceEvents(), "KeyspaceEvents with the keyspace channel refused")
	l := c.GetLock(name)
	ctx := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(ctx))
	require.NoError(t, l.Unlock(ctx))
	expectEvents(t, w, handle.Event{Type: handle.Released})
}
