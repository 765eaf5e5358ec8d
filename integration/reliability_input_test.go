package integration_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/rlock"
)

// relCall is one call of the public API, reduced to its error.
type relCall struct {
	desc string
	call func(ctx context.Context) error
}

// relInput runs calls against a private server through a counting client
// and checks what each returned, that none panicked, and what it sent.
type relInput struct {
	t   *testing.T
	srv *redistest.Server
	raw rueidis.Client
	f   *relocktest.Faulty
	c   *rlock.Client
}

func newRelInput(t *testing.T) *relInput {
	srv := redistest.Start(t)
	raw := srv.Client(t)
	in := &relInput{t: t, srv: srv, raw: raw, f: relocktest.NewFaulty(raw)}
	c, err := rlock.New(in.f)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	in.c = c
	return in
}

// state is what "nothing changed in Redis" compares: every key but unlock
// latches (which a release writes even when it released nothing, and
// which expire by themselves), with its contents.
func (in *relInput) state() map[string]string {
	in.t.Helper()
	ctx := context.Background()
	keys, err := in.raw.Do(ctx, in.raw.B().Keys().Pattern("*").Build()).AsStrSlice()
	require.NoError(in.t, err, "KEYS")
	st := make(map[string]string)
	for _, k := range keys {
		if strings.HasPrefix(k, layout.UnlockLatchPrefix+":") {
			continue
		}
		m, err := in.raw.Do(ctx, in.raw.B().Dump().Key(k).Build()).ToString()
		if !rueidis.IsRedisNil(err) {
			require.NoError(in.t, err, "DUMP %s", k)
		}
		st[k] = m
	}
	return st
}

// expect runs each call and checks that its error matches want. With
// silent set, the call must send nothing to Redis.
func (in *relInput) expect(ctx context.Context, want error, silent bool, calls ...relCall) {
	in.t.Helper()
	before := in.state()
	for _, c := range calls {
		sent := in.f.Commands()
		err := func() (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = fmt.Errorf("panic: %v", p)
				}
			}()
			return c.call(ctx)
		}()
		assert.ErrorIs(in.t, err, want, c.desc)
		if silent {
			assert.Zero(in.t, in.f.Commands()-sent, "%s: commands sent", c.desc)
		}
	}
	assert.Equal(in.t, before, in.state(), "the keys in Redis (with their contents) after the calls")
}

// relLockCalls are the calls of every method of a lock of any kind (with
// fenced's extra methods when given); withOwner leaves out the methods
// that do not act for the owner in ctx.
func relLockCalls(l relKindLock, fenced *rlock.FencedLock, ownerOnly bool) []relCall {
	fnRan := func(context.Context) error { return errors.New("fn ran") }
	calls := []relCall{
		{"Lock", l.Lock},
		{"LockLease(1s)", func(ctx context.Context) error { return l.LockLease(ctx, time.Second) }},
		{"TryLock(0, 0)", func(ctx context.Context) error { _, err := l.TryLock(ctx, 0, 0); return err }},
		{"TryLock(1s, 1s)", func(ctx context.Context) error { _, err := l.TryLock(ctx, time.Second, time.Second); return err }},
		{"Unlock", l.Unlock},
		{"IsHeldByOwner", func(ctx context.Context) error { _, err := l.IsHeldByOwner(ctx); return err }},
		{"HoldCount", func(ctx context.Context) error { _, err := l.HoldCount(ctx); return err }},
		{"Do", func(ctx context.Context) error { return l.Do(ctx, fnRan) }},
	}
	if !ownerOnly {
		calls = append(calls,
			relCall{"ForceUnlock", func(ctx context.Context) error { _, err := l.ForceUnlock(ctx); return err }},
			relCall{"IsLocked", func(ctx context.Context) error { _, err := l.IsLocked(ctx); return err }},
			relCall{"RemainingLease", func(ctx context.Context) error { _, err := l.RemainingLease(ctx); return err }},
		)
	}
	if fenced != nil {
		calls = append(calls,
			relCall{"LockAndGetToken", func(ctx context.Context) error { _, err := fenced.LockAndGetToken(ctx); return err }},
			relCall{"TryLockAndGetToken", func(ctx context.Context) error {
				_, _, err := fenced.TryLockAndGetToken(ctx, 0, time.Second)
				return err
			}},
			relCall{"Token", func(ctx context.Context) error { _, err := fenced.Token(ctx); return err }},
		)
	}
	return calls
}

func relDurationCalls(l relKindLock, fenced *rlock.FencedLock) []relCall {
	type wl struct{ wait, lease time.Duration }
	var calls []relCall
	for _, d := range []wl{
		{-time.Nanosecond, 0}, {-time.Hour, time.Second}, {math.MinInt64, 0},
		{math.MaxInt64, 0}, {lockcore.MaxLease + 1, 0},
		{0, -time.Millisecond}, {0, time.Nanosecond}, {0, 999 * time.Microsecond},
		{0, math.MaxInt64}, {0, 1 << 62}, {0, lockcore.MaxLease + 1},
	} {
		calls = append(calls, relCall{fmt.Sprintf("TryLock(%v, %v)", d.wait, d.lease), func(ctx context.Context) error {
			_, err := l.TryLock(ctx, d.wait, d.lease)
			return err
		}})
		if fenced != nil {
			calls = append(calls, relCall{fmt.Sprintf("TryLockAndGetToken(%v, %v)", d.wait, d.lease), func(ctx context.Context) error {
				_, _, err := fenced.TryLockAndGetToken(ctx, d.wait, d.lease)
				return err
			}})
		}
	}
	for _, lease := range []time.Duration{0, -time.Millisecond, 500 * time.Microsecond, math.MaxInt64, math.MinInt64} {
		calls = append(calls, relCall{fmt.Sprintf("LockLease(%v)", lease), func(ctx context.Context) error {
			return l.LockLease(ctx, lease)
		}})
	}
	calls = append(calls, relCall{"Do(nil)", func(ctx context.Context) error { return l.Do(ctx, nil) }})
	return calls
}

var (
	relBadNames = map[string]string{
		"empty":             "",
		"oversized":         strings.Repeat("n", lockcore.MaxNameLen+1),
		"NUL":               "a\x00b",
		"newline":           "a\nb",
		"tab":               "a\tb",
		"DEL":               "a\x7f",
		"C1 control":        "a\u0085b",
		"invalid UTF-8":     "a\xffb",
		"truncated UTF-8":   "a\xe2\x82",
		"escape sequence":   "\x1b[2J",
		"carriage return":   "a\rb",
		"only a control":    "\x01",
		"oversized by UTF8": strings.Repeat("é", lockcore.MaxNameLen/2+1),
	}
	relBadOwners = map[string]string{
		"empty":           "",
		"oversized":       strings.Repeat("o", lockcore.MaxOwnerLen+1),
		"NUL":             "o\x00",
		"newline":         "o\n",
		"DEL":             "\x7f",
		"C1 control":      "\u009b",
		"invalid UTF-8":   "\xc3\x28",
		"escape sequence": "\x1b[31m",
	}
)

// TestReliabilityBadInput feeds every public call of every lock kind, of
// the Client and of multilock bad names, owners, durations and functions,
// and uses handles after Close: each call returns a typed error, panics
// not, sends nothing to Redis and changes nothing there.
func TestReliabilityBadInput(t *testing.T) {
	in := newRelInput(t)
	for _, k := range relKinds {
		fencedOf := func(c *rlock.Client, name string) *rlock.FencedLock {
			if k.name == "FencedLock" {
				return c.GetFencedLock(name)
			}
			return nil
		}
		t.Run(k.name, func(t *testing.T) {
			in.t = t
			for desc, name := range relBadNames {
				t.Run("name "+desc, func(t *testing.T) {
					in.t = t
					l := k.get(in.c, name)
					ctx := rlock.WithOwner(t.Context(), "a")
					in.expect(ctx, rlock.ErrInvalidArgument, true, relLockCalls(l, fencedOf(in.c, name), false)...)
					in.expect(t.Context(), rlock.ErrInvalidArgument, true, relLockCalls(l, fencedOf(in.c, name), false)...)
					relClosed(t, l.Done(ctx))
				})
			}
			name := relName(t, "lock")
			l := k.get(in.c, name)
			for desc, owner := range relBadOwners {
				t.Run("owner "+desc, func(t *testing.T) {
					in.t = t
					ctx := rlock.WithOwner(t.Context(), owner)
					in.expect(ctx, rlock.ErrInvalidArgument, true, relLockCalls(l, fencedOf(in.c, name), true)...)
					relClosed(t, l.Done(ctx))
				})
			}
			t.Run("durations and functions", func(t *testing.T) {
				in.t = t
				in.expect(rlock.WithOwner(t.Context(), "a"), rlock.ErrInvalidArgument, true, relDurationCalls(l, fencedOf(in.c, name))...)
			})
			t.Run("never taken", func(t *testing.T) {
				in.t = t
				// With no owner in ctx there is no anonymous hold: nothing is sent.
				in.expect(t.Context(), rlock.ErrNotHeld, true, relCall{"Unlock", l.Unlock})
				calls := []relCall{{"Unlock", l.Unlock}}
				if f := fencedOf(in.c, name); f != nil {
					calls = append(calls, relCall{"Token", func(ctx context.Context) error { _, err := f.Token(ctx); return err }})
				}
				in.expect(rlock.WithOwner(t.Context(), "a"), rlock.ErrNotHeld, false, calls...)
			})
			t.Run("unlocked twice", func(t *testing.T) {
				in.t = t
				for _, ctx := range []context.Context{rlock.WithOwner(t.Context(), "a"), t.Context()} {
					require.NoError(t, l.Lock(ctx))
					require.NoError(t, l.Unlock(ctx))
					in.expect(ctx, rlock.ErrNotHeld, false, relCall{"second Unlock", l.Unlock})
				}
			})
			t.Run("context", func(t *testing.T) {
				in.t = t
				relContextCases(t, in, k, fencedOf(in.c, name) != nil)
			})
		})
	}
	t.Run("after Close", func(t *testing.T) {
		in.t = t
		f := relocktest.NewFaulty(in.raw)
		c, err := rlock.New(f)
		require.NoError(t, err)
		name := relName(t, "lock")
		held := c.GetLock(name + ":held")
		require.NoError(t, held.Lock(t.Context()))
		require.NoError(t, c.Close())
		assert.NoError(t, c.Close(), "second Close")
		in.f = f
		ctx := rlock.WithOwner(t.Context(), "a")
		for _, k := range relKinds {
			var fenced *rlock.FencedLock
			if k.name == "FencedLock" {
				fenced = c.GetFencedLock(name)
			}
			in.expect(ctx, rlock.ErrClosed, true, relLockCalls(k.get(c, name), fenced, false)...)
			relClosed(t, k.get(c, name).Done(ctx))
		}
		relClosed(t, held.Done(t.Context()))
		_, err = c.GetLock(name).TryLock(ctx, time.Second, 0)
		assert.True(t, errors.Is(err, rlock.ErrNotAcquired) || errors.Is(err, rlock.ErrClosed),
			"TryLock after Close = %v, want ErrNotAcquired or ErrClosed", err)
		// The lock taken before Close expires by its lease; remove it.
		_ = in.raw.Do(t.Context(), in.raw.B().Del().Key(name+":held").Build()).Error()
	})
	t.Run("options", func(t *testing.T) {
		in.t = t
		for desc, opt := range map[string]rlock.Option{
			"WithWatchdogTimeout(0)":        rlock.WithWatchdogTimeout(0),
			"WithWatchdogTimeout(-1s)":      rlock.WithWatchdogTimeout(-time.Second),
			"WithWatchdogTimeout(29ms)":     rlock.WithWatchdogTimeout(29 * time.Millisecond),
			"WithWatchdogTimeout(1ns)":      rlock.WithWatchdogTimeout(1),
			"WithWatchdogTimeout(max)":      rlock.WithWatchdogTimeout(math.MaxInt64),
			"WithWatchdogTimeout(100y+1)":   rlock.WithWatchdogTimeout(lockcore.MaxLease + 1),
			"WithReplicaSync(-1, 1s)":       rlock.WithReplicaSync(-1, time.Second),
			"WithReplicaSync(1, 0)":         rlock.WithReplicaSync(1, 0),
			"WithReplicaSync(1, 500us)":     rlock.WithReplicaSync(1, 500*time.Microsecond),
			"WithReplicaSync(1, negative)":  rlock.WithReplicaSync(1, -time.Second),
			"WithReplicaSync(max int, -1s)": rlock.WithReplicaSync(math.MaxInt, -time.Second),
		} {
			sent := in.f.Commands()
			_, err := rlock.New(in.f, opt)
			assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "New(%s)", desc)
			c, err := rlock.NewClient(in.srv.ClientOption(), opt)
			if !assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "NewClient(%s)", desc) && c != nil {
				_ = c.Close()
			}
			assert.Zero(t, in.f.Commands()-sent, "%s: commands sent", desc)
		}
		_, err := rlock.New(nil)
		assert.ErrorIs(t, err, rlock.ErrInvalidArgument, "New(nil)")
		c, err := rlock.NewClient(rueidis.ClientOption{})
		if !assert.Error(t, err, "NewClient with no address") {
			_ = c.Close()
		}
	})
	t.Run("multilock", func(t *testing.T) {
		in.t = t
		relMultilockInput(t, in)
	})
}

// relContextCases cancels the context before, during and after the
// acquire script.
func relContextCases(t *testing.T, in *relInput, k relKind, fenced bool) {
	name := relName(t, "lock")
	l := k.get(in.c, name)
	owner := rlock.WithOwner(t.Context(), "a")

	cancelled, cancel := context.WithCancel(owner)
	cancel()
	in.expect(cancelled, context.Canceled, true, relLockCalls(l, nil, true)[:4]...)
	in.expect(cancelled, rlock.ErrNotAcquired, true, relLockCalls(l, nil, true)[:4]...)

	// During: the script runs (and wins) while the caller's context ends.
	ctx, cancel := context.WithCancel(owner)
	defer cancel()
	r := in.f.Inject(&relocktest.Rule{SHA1s: k.acquire, N: 1, Run: true, Keep: true, Before: func([]string) { cancel() }})
	err := l.Lock(ctx)
	in.f.Clear()
	require.EqualValues(t, 1, r.Hits(), "runs of the acquire script")
	assert.ErrorIs(t, err, rlock.ErrNotAcquired, "Lock cancelled while its script ran")
	assert.ErrorIs(t, err, context.Canceled, "Lock cancelled while its script ran")
	n, err := l.HoldCount(owner)
	require.NoError(t, err)
	assert.Zero(t, n, "HoldCount after a cancelled Lock: the won level given back")
	relAssertLocked(t, l, false, "after a Lock cancelled during its script")
	keys := []string{name, layout.Queue(name), layout.Timeouts(name)}
	left, err := in.raw.Do(t.Context(), in.raw.B().Exists().Key(keys...).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, left, "the lock's keys left after a Lock cancelled during its script")
	if fenced {
		// The counter moved (tokens only grow), and that is all.
		tok, _ := in.raw.Do(t.Context(), in.raw.B().Get().Key(layout.Token(name)).Build()).AsInt64()
		t.Logf("fencing counter after the cancelled acquisition: %d", tok)
	}

	// After: the hold stands; Unlock and Do's release work with the
	// cancelled context.
	ctx, cancel = context.WithCancel(owner)
	require.NoError(t, l.Lock(ctx))
	cancel()
	assert.NoError(t, l.Unlock(ctx), "Unlock with a context cancelled after Lock")
	ctx, cancel = context.WithCancel(owner)
	err = l.Do(ctx, func(fctx context.Context) error {
		cancel()
		relocktest.Receive(t, fctx.Done(), 5*time.Second, "fn's context to end with its caller's")
		return context.Cause(fctx)
	})
	assert.ErrorIs(t, err, context.Canceled, "Do whose context was cancelled while fn ran")
	assert.NotErrorIs(t, err, rlock.ErrLockLost, "Do whose context was cancelled while fn ran: not a loss")
	relAssertLocked(t, l, false, "after Unlock and Do with cancelled contexts")
}

func relClosed(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	default:
		assert.Fail(t, "Done channel of a hold that does not exist is open")
	}
}

// relMultilockInput: MultiLock and RedLock with no locks, nil locks, bad
// options, durations, owners and functions.
func relMultilockInput(t *testing.T, in *relInput) {
	name := relName(t, "lock")
	good := []multilock.Locker{in.c.GetLock(name + ":1"), in.c.GetLock(name + ":2"), in.c.GetLock(name + ":3")}
	type ml interface {
		multilock.Locker
		Lock(ctx context.Context) error
		LockLease(ctx context.Context, lease time.Duration) error
		Do(ctx context.Context, fn func(ctx context.Context) error) error
		Done(ctx context.Context) <-chan struct{}
	}
	calls := func(m ml) []relCall {
		return []relCall{
			{"Lock", m.Lock},
			{"LockLease(1s)", func(ctx context.Context) error { return m.LockLease(ctx, time.Second) }},
			{"TryLock(0, 0)", func(ctx context.Context) error { _, err := m.TryLock(ctx, 0, 0); return err }},
			{"Unlock", m.Unlock},
			{"Do", func(ctx context.Context) error {
				return m.Do(ctx, func(context.Context) error { return errors.New("fn ran") })
			}},
		}
	}
	durations := func(m ml) []relCall {
		var cs []relCall
		for _, d := range [][2]time.Duration{{-1, 0}, {math.MinInt64, 0}, {math.MaxInt64, 0}, {0, -1}, {0, time.Microsecond}, {0, math.MaxInt64}} {
			cs = append(cs, relCall{fmt.Sprintf("TryLock(%v, %v)", d[0], d[1]), func(ctx context.Context) error {
				_, err := m.TryLock(ctx, d[0], d[1])
				return err
			}})
		}
		for _, lease := range []time.Duration{0, -1, time.Microsecond, math.MaxInt64} {
			cs = append(cs, relCall{fmt.Sprintf("LockLease(%v)", lease), func(ctx context.Context) error { return m.LockLease(ctx, lease) }})
		}
		return append(cs, relCall{"Do(nil)", func(ctx context.Context) error { return m.Do(ctx, nil) }})
	}
	var nilLock *rlock.Lock
	ctx := rlock.WithOwner(t.Context(), "a")
	for desc, m := range map[string]ml{
		"MultiLock of none":        multilock.New(),
		"MultiLock with nil":       multilock.New(good[0], nil),
		"MultiLock with nil ptr":   multilock.New(good[0], nilLock),
		"RedLock of none":          multilock.NewRedLock(),
		"RedLock with nil":         multilock.NewRedLock(good[0], nil, good[1]),
		"RedLock with nil ptr":     multilock.NewRedLock(nilLock, good[1], good[2]),
		"nested invalid MultiLock": multilock.New(good[0], multilock.New()),
	} {
		t.Run(desc, func(t *testing.T) {
			in.t = t
			in.expect(ctx, rlock.ErrInvalidArgument, true, calls(m)...)
			relClosed(t, m.Done(ctx))
		})
	}
	for desc, m := range relBadRedLockOptions(good) {
		t.Run(desc, func(t *testing.T) {
			in.t = t
			cs := calls(m)
			// Unlock: see TestReliabilityRedLockBadOptionUnlock.
			cs = slices.DeleteFunc(cs, func(c relCall) bool { return c.desc == "Unlock" })
			in.expect(ctx, rlock.ErrInvalidArgument, true, cs...)
			relClosed(t, m.Done(ctx))
		})
	}
	// A RedLock needs independent masters: the first lock is on the
	// server whose state the checks compare, the others on servers of
	// their own.
	independent := []multilock.Locker{good[0]}
	for range 2 {
		c, err := rlock.New(redistest.Start(t).Client(t))
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
		independent = append(independent, c.GetLock(name))
	}
	for desc, m := range map[string]ml{"MultiLock": multilock.New(good...), "RedLock": multilock.NewRedLock(independent...)} {
		t.Run(desc, func(t *testing.T) {
			in.t = t
			in.expect(ctx, rlock.ErrInvalidArgument, true, durations(m)...)
			for od, owner := range relBadOwners {
				in.t = t
				t.Run("owner "+od, func(t *testing.T) {
					in.t = t
					in.expect(rlock.WithOwner(t.Context(), owner), rlock.ErrInvalidArgument, true, calls(m)...)
				})
			}
			in.t = t
			in.expect(ctx, rlock.ErrNotHeld, false, relCall{"Unlock never taken", m.Unlock})
			in.expect(t.Context(), rlock.ErrNotHeld, true, relCall{"anonymous Unlock never taken", m.Unlock})
		})
	}
	t.Run("MultiLock over a bad name", func(t *testing.T) {
		in.t = t
		// The good lock sorts first and is taken, then given back.
		m := multilock.New(in.c.GetLock(name+":a"), in.c.GetLock(name+":b\n"))
		in.expect(ctx, rlock.ErrInvalidArgument, false, calls(m)[:3]...)
	})
}

func relBadRedLockOptions(locks []multilock.Locker) map[string]*multilock.RedLock {
	return map[string]*multilock.RedLock{
		"RedLock watchdog 0":     multilock.NewRedLock(locks...).With(multilock.WithWatchdogTimeout(0)),
		"RedLock instance 0":     multilock.NewRedLock(locks...).With(multilock.WithInstanceTimeout(0)),
		"RedLock retry negative": multilock.NewRedLock(locks...).With(multilock.WithRetryDelay(-time.Second)),
	}
}

// TestReliabilityRedLockBadOptionUnlock: "An invalid option is an error
// (matching ErrInvalidArgument) that every method of the result returns."
func TestReliabilityRedLockBadOptionUnlock(t *testing.T) {
	in := newRelInput(t)
	name := relName(t, "lock")
	locks := []multilock.Locker{in.c.GetLock(name + ":1"), in.c.GetLock(name + ":2"), in.c.GetLock(name + ":3")}
	for desc, m := range relBadRedLockOptions(locks) {
		t.Run(desc, func(t *testing.T) {
			in.t = t
			in.expect(rlock.WithOwner(t.Context(), "a"), rlock.ErrInvalidArgument, true, relCall{"Unlock", m.Unlock})
		})
	}
}
