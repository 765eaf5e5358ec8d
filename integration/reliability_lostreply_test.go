package integration_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// relProxy is a toxiproxy, embedded in the test, on loopback in front of
// a redis-server.
type relProxy struct {
	t *testing.T
	p *toxiproxy.Proxy
}

func startRelProxy(t *testing.T, upstream string) *relProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "redis", "127.0.0.1:0", upstream)
	require.NoError(t, p.Start(), "toxiproxy")
	t.Cleanup(p.Stop)
	return &relProxy{t: t, p: p}
}

// Addr is where clients connect.
func (x *relProxy) Addr() string { return x.p.Listen }

// toxic adds a toxic on the reply path (downstream: server to client) and
// returns a function that removes it.
func (x *relProxy) toxic(typ string, attrs string) (remove func()) {
	x.t.Helper()
	name := fmt.Sprintf("%s-%d", typ, relSeq.Add(1))
	js := fmt.Sprintf(`{"name":%q,"type":%q,"stream":"downstream","attributes":%s}`, name, typ, attrs)
	_, err := x.p.Toxics.AddToxicJson(strings.NewReader(js))
	require.NoError(x.t, err, "toxic %s", js)
	removed := false
	remove = func() {
		if !removed {
			removed = true
			_ = x.p.Toxics.RemoveToxic(context.Background(), name)
		}
	}
	x.t.Cleanup(remove)
	return remove
}

// TestReliabilityLostReply loses or delays the replies of a lock's
// scripts with a toxiproxy in front of the server. The caller gets an
// error or the lock, never the lock twice; the hold count is what the
// caller was told; an orphaned hold (won on the server after the caller
// gave up) is taken back as soon as the server answers. (TestReliabilityLostReplyHistory runs
// test processes through the same faults.)
func TestReliabilityLostReply(t *testing.T) {
	e := newRelEnv(t)
	px := startRelProxy(t, e.lock.Addr)
	e.lockAddr = px.Addr()
	var faults atomic.Int64
	w := relFaultCounter{&faults}
	raw := e.lock.Client(t) // straight to the server
	const lease = time.Second
	c := e.client(t, rlock.WithWatchdogTimeout(lease))
	other := e.client(t, rlock.WithWatchdogTimeout(lease))

	field := func(owner string) string { return layout.Field(c.ID(), owner) }
	hget := func(name, owner string) string {
		v, _ := raw.Do(context.Background(), raw.B().Hget().Key(name).Field(field(owner)).Build()).ToString()
		return v
	}
	// setup returns a lock whose scripts are loaded and whose connections
	// are up, so that the fault hits the call under test.
	setup := func(t *testing.T) (*rlock.FencedLock, context.Context) {
		name := relName(t, "lock")
		relCleanAfter(t, e, name)
		l := c.GetFencedLock(name)
		a := rlock.WithOwner(t.Context(), "a")
		_, err := l.LockAndGetToken(a)
		require.NoError(t, err)
		require.NoError(t, l.Unlock(a))
		return l, a
	}
	// orphan checks a hold won on the server after its caller gave up: the
	// call settles it (or the Client goes on settling it once Redis
	// answers), so it ends long before its lease, and the lock is free for
	// another owner then.
	orphan := func(t *testing.T, l *rlock.FencedLock, since time.Time) {
		t.Helper()
		relocktest.Eventually(t, lease, "the orphaned hold to be taken back", func() bool {
			return hget(l.Name(), "a") == ""
		})
		t.Logf("orphaned hold (if any) taken back %v after the call", time.Since(since).Round(time.Millisecond))
		b := rlock.WithOwner(t.Context(), "b")
		ob := other.GetFencedLock(l.Name())
		ok, err := ob.TryLock(b, 0, 0)
		assert.NoError(t, err, "another owner's TryLock after the settlement")
		assert.True(t, ok, "another owner's TryLock after the settlement")
		_ = ob.Unlock(b)
	}

	t.Run("acquire reply delayed past the deadline", func(t *testing.T) {
		l, a := setup(t)
		remove := px.toxic("latency", `{"latency":800}`)
		w.fault()
		start := time.Now()
		ctx, cancel := context.WithTimeout(a, 200*time.Millisecond)
		defer cancel()
		_, err := l.LockAndGetToken(ctx)
		took := time.Since(start)
		remove()
		require.Error(t, err, "LockAndGetToken with its reply delayed past the deadline")
		assert.ErrorIs(t, err, rlock.ErrNotAcquired, "LockAndGetToken")
		assert.LessOrEqual(t, took, 700*time.Millisecond, "the time LockAndGetToken took: about its 200ms deadline")
		orphan(t, l, start)
	})

	t.Run("acquire reply lost and the caller gives up", func(t *testing.T) {
		l, a := setup(t)
		remove := px.toxic("reset_peer", `{"timeout":0}`)
		w.fault()
		start := time.Now()
		ctx, cancel := context.WithTimeout(a, 300*time.Millisecond)
		defer cancel()
		_, err := l.LockAndGetToken(ctx)
		remove()
		require.Error(t, err, "LockAndGetToken with every reply lost")
		assert.ErrorIs(t, err, rlock.ErrNotAcquired, "LockAndGetToken")
		orphan(t, l, start)
	})

	t.Run("acquire reply lost and the connection back in time", func(t *testing.T) {
		l, a := setup(t)
		remove := px.toxic("reset_peer", `{"timeout":0}`)
		w.fault()
		ctx, cancel := context.WithTimeout(a, 10*time.Second)
		defer cancel()
		wt := relWait(t, ctx, l.LockAndGetToken)
		relocktest.Eventually(t, 5*time.Second, "the script to run on the server", func() bool { return hget(l.Name(), "a") != "" })
		remove()
		relocktest.Receive(t, wt.done, 15*time.Second, "LockAndGetToken to return once the connection is back")
		require.NoError(t, wt.err, "LockAndGetToken: want the lock once the connection is back")
		n, err := l.HoldCount(a)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "HoldCount: one acquisition, one level")
		tok, err := l.Token(a)
		require.NoError(t, err)
		assert.Equal(t, wt.token, tok, "Token")
		require.NoError(t, l.Unlock(a))
		relAssertLocked(t, l, false, "after one Unlock of one acquisition")
	})

	t.Run("unlock reply lost", func(t *testing.T) {
		l, a := setup(t)
		for range 2 {
			require.NoError(t, l.Lock(a))
		}
		remove := px.toxic("reset_peer", `{"timeout":0}`)
		w.fault()
		done := make(chan error, 1)
		go func() { done <- l.Unlock(a) }()
		relocktest.Eventually(t, 5*time.Second, "the unlock to run on the server", func() bool { return hget(l.Name(), "a") == "1" })
		remove()
		assert.NoError(t, relocktest.Receive(t, done, 15*time.Second, "Unlock to return once the connection is back"),
			"Unlock whose reply was lost: want nil once resent")
		n, err := l.HoldCount(a)
		require.NoError(t, err)
		assert.Equal(t, 1, n, "HoldCount after one Unlock of two levels (the resent unlock is latched)")
		require.NoError(t, l.Unlock(a))
		relAssertLocked(t, l, false, "after the last Unlock")
	})

	t.Run("renewal replies delayed", func(t *testing.T) {
		name := relName(t, "lock")
		relCleanAfter(t, e, name)
		h := relHold(t, c.GetLock(name), "a", nil)
		// Renewals run back to back when a call takes longer than the
		// interval, so a renewal must take under half the lease; a sixth
		// leaves room for a second round trip (a NOSCRIPT reload).
		remove := px.toxic("latency", fmt.Sprintf(`{"latency":%d}`, (lease/6).Milliseconds()))
		w.fault()
		select {
		case <-h.lost:
			assert.Failf(t, "hold lost", "hold lost with renewal replies delayed by a sixth of the lease: %v", h.cause)
		case <-time.After(2 * lease):
			// The scenario, not a wait: the hold lives two leases of
			// delayed renewals.
		}
		remove()
		assert.NoError(t, h.unlock(t), "Do")
	})

	t.Logf("reliability: scenario=%s faults=%d", t.Name(), faults.Load())
	relInProcessFaults(t, int(faults.Load()))
}

// relFaultCounter counts faults for a test without a workload.
type relFaultCounter struct{ n *atomic.Int64 }

func (c relFaultCounter) fault() { c.n.Add(1) }

// TestReliabilityLostReplyHistory runs test processes through a
// toxiproxy that resets every connection at its next reply, now and then,
// and checks their history, then runs the canary through it.
func TestReliabilityLostReplyHistory(t *testing.T) {
	e := newRelEnv(t)
	px := startRelProxy(t, e.lock.Addr)
	e.lockAddr = px.Addr()
	w := e.start(t, relConfig{procs: 3})
	from := 0
	for range 5 {
		from = w.waitAcquisitions(from, 20, 30*time.Second)
		remove := px.toxic("reset_peer", `{"timeout":0}`)
		w.fault()
		time.Sleep(150 * time.Millisecond) // the scenario: the fault lasts 150ms
		remove()
	}
	w.waitAcquisitions(from, 20, 30*time.Second)
	res := w.finish(t.Name())
	res.log(t)
	res.requireSafe(t)
	e.canary(t)
}

// TestReliabilityLostReplyHoldCount: an acquisition whose reply was lost
// (the script ran, the connection dropped, and Redis could not be asked in
// time whether it won) leaves a hold in Redis that the caller does not
// know of. The owner's next attempt, in the same waiting Lock or in a
// later call, must not stack a level on it that nobody will release:
// HoldCount must be the number of successful Locks, and one Unlock per
// successful Lock must free the lock.
func TestReliabilityLostReplyHoldCount(t *testing.T) {
	raw := relocktest.Raw(t)
	f := relocktest.NewFaulty(raw)
	c, err := rlock.New(f, rlock.WithWatchdogTimeout(2*time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	for _, k := range relKinds {
		t.Run(k.name, func(t *testing.T) {
			l := k.get(c, relocktest.Name(t))
			a := rlock.WithOwner(t.Context(), "a")
			// The script runs; its reply is lost (a connection error), and
			// so is every reply until the caller's deadline.
			lostReply := relocktest.LostReply()
			f.Inject(&relocktest.Rule{SHA1s: k.acquire, N: 1, Reply: lostReply, Run: true})
			f.Inject(&relocktest.Rule{SHA1s: []string{lua.FencedToken.SHA1}, N: -1, Reply: lostReply})
			ctx, cancel := context.WithTimeout(a, 300*time.Millisecond)
			err := l.Lock(ctx)
			cancel()
			f.Clear()
			granted := 0 // successful Locks, each owed one Unlock
			if err == nil {
				granted++
			}
			require.NoError(t, l.Lock(a))
			granted++
			n, hcErr := l.HoldCount(a)
			require.NoError(t, hcErr)
			assert.Equal(t, granted, n, "HoldCount after %d successful Locks", granted)
			for range granted {
				require.NoError(t, l.Unlock(a))
			}
			locked, lockedErr := l.IsLocked(t.Context())
			require.NoError(t, lockedErr)
			if !assert.False(t, locked, "still locked after one Unlock per successful Lock (first Lock: %v)", err) {
				_, _ = l.ForceUnlock(t.Context())
			}
		})
	}
}
