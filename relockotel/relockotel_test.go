package relockotel_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/relockotel"
	"github.com/relock-go/relock/rlock"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// setup is an Observer on a ManualReader and an in-memory span recorder.
type setup struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *relockotel.Observer
}

func newSetup(t *testing.T, opts ...relockotel.Option) *setup {
	t.Helper()
	s := &setup{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(s.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	s.obs = relockotel.New(append([]relockotel.Option{relockotel.WithMeterProvider(mp),
		relockotel.WithTracerProvider(tp)}, opts...)...)
	return s
}

// collect returns the metrics recorded so far, by name.
func (s *setup) collect(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, s.reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, relockotel.ScopeName, sm.Scope.Name, "the metrics' scope")
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// sumNow is the value of the int64 sum name over the points whose
// attributes include want, or -1 when it cannot be read: for conditions of
// relocktest.Eventually, which must not fail the test.
func (s *setup) sumNow(name string, want map[string]string) int64 {
	var rm metricdata.ResourceMetrics
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		return -1
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				return -1
			}
			for _, dp := range sum.DataPoints {
				if matches(dp.Attributes, want) {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// matches reports whether set has every attribute of want.
func matches(set attribute.Set, want map[string]string) bool {
	for k, v := range want {
		got, ok := set.Value(attribute.Key(k))
		if !ok || got.AsString() != v {
			return false
		}
	}
	return true
}

// count is the number of measurements of histogram m whose attributes
// include want.
func count(t *testing.T, m metricdata.Metrics, want map[string]string) uint64 {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a %T, want a float64 histogram", m.Name, m.Data)
	var n uint64
	for _, dp := range h.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Count
		}
	}
	return n
}

// sum is the value of sum m over the points whose attributes include want.
func sum(t *testing.T, m metricdata.Metrics, want map[string]string) int64 {
	t.Helper()
	if m.Data == nil {
		return 0 // nothing recorded yet
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is a %T, want an int64 sum", m.Name, m.Data)
	var n int64
	for _, dp := range s.DataPoints {
		if matches(dp.Attributes, want) {
			n += dp.Value
		}
	}
	return n
}

func kv(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

// everyAttributeSet returns every attribute set of every point.
func everyAttributeSet(ms map[string]metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	for _, m := range ms {
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				sets = append(sets, dp.Attributes)
			}
		}
	}
	return sets
}

// TestInstruments runs real lock traffic against redis-server and checks
// each instrument, its unit and kind, and its attributes.
func TestInstruments(t *testing.T) {
	s := newSetup(t)
	srv := redistest.Shared(t)
	c := relocktest.ClientOn(t, srv, rlock.WithObserver(s.obs), rlock.WithWatchdogTimeout(150*time.Millisecond))
	other := relocktest.ClientOn(t, srv)
	raw := srv.Client(t)
	ctx := rlock.WithOwner(t.Context(), "me")

	// Acquired and released, for each kind a Client hands out.
	for _, l := range []interface {
		Lock(context.Context) error
		Unlock(context.Context) error
	}{c.GetLock(relocktest.Name(t)), c.GetFencedLock(relocktest.Name(t)), c.GetFairLock(relocktest.Name(t))} {
		require.NoError(t, l.Lock(ctx))
		require.NoError(t, l.Unlock(ctx))
	}

	// Not acquired: once at once, once after a wait.
	busy := relocktest.Name(t)
	otherCtx := rlock.WithOwner(t.Context(), "other")
	require.NoError(t, other.GetLock(busy).Lock(otherCtx))
	for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
		ok, err := c.GetLock(busy).TryLock(ctx, wait, 0)
		require.NoError(t, err, "TryLock(%v)", wait)
		require.False(t, ok, "TryLock(%v)", wait)
	}
	// A waiter, counted while it waits, that gets the lock.
	got := make(chan error, 1)
	go func() { got <- c.GetLock(busy).Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "a waiter", func() bool {
		return s.sumNow("relock.waiters.active", kv("relock.lock.kind", "lock")) == 1
	})
	require.NoError(t, other.GetLock(busy).Unlock(otherCtx))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock"))
	require.NoError(t, c.GetLock(busy).Unlock(ctx))

	// An error: the key holds a string.
	wrong := relocktest.Name(t)
	require.NoError(t, raw.Do(ctx, raw.B().Set().Key(wrong).Value("x").Build()).Error())
	ok, err := c.GetLock(wrong).TryLock(ctx, 0, 0)
	require.Error(t, err, "TryLock on a string key")
	require.False(t, ok, "TryLock on a string key")

	// Renewed, then lost: the key is deleted under the holder.
	renewed := c.GetLock(relocktest.Name(t))
	require.NoError(t, renewed.Lock(ctx))
	relocktest.Eventually(t, 5*time.Second, "a renewal", func() bool {
		return s.sumNow("relock.renewals", kv("relock.outcome", "ok")) > 0
	})
	require.NoError(t, raw.Do(ctx, raw.B().Del().Key(renewed.Name()).Build()).Error())
	relocktest.Receive(t, renewed.Done(ctx), 5*time.Second, "the loss to be noticed")

	// A MultiLock of the Client's locks reports as multi.
	m := multilock.New(c.GetLock(relocktest.Name(t)), c.GetLock(relocktest.Name(t)))
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))

	ms := s.collect(t)
	for _, name := range []string{"relock.acquire.duration", "relock.hold.duration", "relock.holds.active",
		"relock.waiters.active", "relock.renewals"} {
		require.NotNil(t, ms[name].Data, "no %s recorded", name)
	}
	acq := ms["relock.acquire.duration"]
	assert.Equal(t, "s", acq.Unit, "relock.acquire.duration's unit")
	for _, tc := range []struct {
		kind, outcome string
		want          uint64
	}{
		{"lock", "acquired", 1 + 1 + 1 + 2}, // plain, busy's waiter, renewed, the MultiLock's two
		{"fenced", "acquired", 1},
		{"fair", "acquired", 1},
		{"lock", "not_acquired", 2},
		{"lock", "error", 1},
		{"multi", "acquired", 1},
	} {
		assert.Equal(t, tc.want, count(t, acq, kv("relock.lock.kind", tc.kind, "relock.outcome", tc.outcome)),
			"relock.acquire.duration{kind=%s,outcome=%s} measurements", tc.kind, tc.outcome)
	}
	h := acq.Data.(metricdata.Histogram[float64])
	bounds := h.DataPoints[0].Bounds
	for _, b := range []float64{.001, .005, .01, .05, .1, .5, 1, 5} {
		assert.Contains(t, bounds, b, "relock.acquire.duration's bounds")
	}
	assert.Equal(t, .001, bounds[0], "relock.acquire.duration's first bound: 1ms")
	assert.Equal(t, 30.0, bounds[len(bounds)-1], "relock.acquire.duration's last bound: 30s")

	hold := ms["relock.hold.duration"]
	assert.Equal(t, "s", hold.Unit, "relock.hold.duration's unit")
	for _, tc := range []struct {
		kind, outcome string
		want          uint64
	}{
		{"lock", "released", 1 + 1 + 2},
		{"fenced", "released", 1},
		{"fair", "released", 1},
		{"lock", "lost", 1},
		{"multi", "released", 1},
	} {
		assert.Equal(t, tc.want, count(t, hold, kv("relock.lock.kind", tc.kind, "relock.outcome", tc.outcome)),
			"relock.hold.duration{kind=%s,outcome=%s} measurements", tc.kind, tc.outcome)
	}

	ren := ms["relock.renewals"]
	assert.Equal(t, "{renewal}", ren.Unit, "relock.renewals' unit")
	assert.True(t, ren.Data.(metricdata.Sum[int64]).IsMonotonic, "relock.renewals must be a counter")
	assert.EqualValues(t, 1, sum(t, ren, kv("relock.lock.kind", "lock", "relock.outcome", "lost")), "relock.renewals{outcome=lost}")
	assert.Zero(t, sum(t, ren, kv("relock.outcome", "failed")), "relock.renewals{outcome=failed}")

	for name, unit := range map[string]string{"relock.holds.active": "{hold}", "relock.waiters.active": "{waiter}"} {
		m := ms[name]
		assert.Equal(t, unit, m.Unit, "%s's unit", name)
		assert.False(t, m.Data.(metricdata.Sum[int64]).IsMonotonic, "%s must be an up-down counter", name)
		for _, kind := range []string{"lock", "fenced", "fair", "multi"} {
			assert.Zero(t, sum(t, m, kv("relock.lock.kind", kind)), "%s{kind=%s} after everything was released", name, kind)
		}
	}
	assert.Zero(t, sum(t, ms["relock.waiters.active"], nil), "relock.waiters.active")

	for _, set := range everyAttributeSet(ms) {
		_, hasName := set.Value(relockotel.AttrName)
		assert.False(t, hasName, "a point has relock.lock.name without WithLockNames: %v", set.ToSlice())
		_, hasKind := set.Value(relockotel.AttrKind)
		assert.True(t, hasKind, "a point lacks relock.lock.kind: %v", set.ToSlice())
	}

	// Spans: one relock.acquire per acquisition call, one relock.release
	// per Unlock, none with the lock name.
	var acquires, releases, errorSpans int
	for _, sp := range s.spans.Ended() {
		attrs := attribute.NewSet(sp.Attributes()...)
		_, hasName := attrs.Value(relockotel.AttrName)
		assert.False(t, hasName, "span %s has relock.lock.name without WithLockNames", sp.Name())
		_, hasKind := attrs.Value(relockotel.AttrKind)
		assert.True(t, hasKind, "span %s lacks relock.lock.kind", sp.Name())
		outcome, ok := attrs.Value(relockotel.AttrOutcome)
		assert.True(t, ok, "span %s lacks relock.outcome", sp.Name())
		switch sp.Name() {
		case "relock.acquire":
			acquires++
		case "relock.release":
			releases++
		default:
			assert.Failf(t, "unexpected span", "unexpected span %q", sp.Name())
		}
		if outcome.AsString() == "error" {
			errorSpans++
			assert.Equal(t, codes.Error, sp.Status().Code, "span %s with outcome error: its status", sp.Name())
			assert.NotEmpty(t, sp.Events(), "span %s with outcome error: the recorded error", sp.Name())
		}
	}
	// Acquisitions: 3 kinds, 2 not acquired, the waiter, the error, the
	// renewed lock, the MultiLock and its 2 locks. Releases: 3 kinds, the
	// waiter's, the MultiLock and its 2 locks.
	assert.Equal(t, 3+2+1+1+1+3, acquires, "relock.acquire spans")
	assert.Equal(t, 3+1+3, releases, "relock.release spans")
	assert.Equal(t, 1, errorSpans, "spans with outcome error")

	// A hold ended by Close.
	require.NoError(t, c.GetLock(relocktest.Name(t)).Lock(ctx))
	require.NoError(t, c.Close())
	ms = s.collect(t)
	assert.EqualValues(t, 1, count(t, ms["relock.hold.duration"], kv("relock.outcome", "closed")), "relock.hold.duration{outcome=closed}")
	assert.Zero(t, sum(t, ms["relock.holds.active"], nil), "relock.holds.active after Close")
}

// TestSpanParents: the spans of a MultiLock's locks are children of the
// MultiLock's, and the acquire span is the child of the caller's.
func TestSpanParents(t *testing.T) {
	s := newSetup(t)
	c := relocktest.Client(t, rlock.WithObserver(s.obs))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(s.spans))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(t.Context(), "request")
	m := multilock.New(c.GetLock(relocktest.Name(t)), c.GetLock(relocktest.Name(t)))
	require.NoError(t, m.Lock(ctx))
	require.NoError(t, m.Unlock(ctx))
	parent.End()
	var multiAcquire spanRef
	var children int
	spans := s.spans.Ended()
	for _, sp := range spans {
		attrs := attribute.NewSet(sp.Attributes()...)
		kind, _ := attrs.Value(relockotel.AttrKind)
		if sp.Name() == "relock.acquire" && kind.AsString() == "multi" {
			multiAcquire = spanRef{sp.SpanContext().SpanID().String(), sp.Parent().SpanID().String()}
		}
	}
	assert.Equal(t, parent.SpanContext().SpanID().String(), multiAcquire.parent, "the parent of the MultiLock's relock.acquire: the caller's span")
	for _, sp := range spans {
		attrs := attribute.NewSet(sp.Attributes()...)
		kind, _ := attrs.Value(relockotel.AttrKind)
		if sp.Name() == "relock.acquire" && kind.AsString() == "lock" {
			children++
			assert.Equal(t, multiAcquire.id, sp.Parent().SpanID().String(), "the parent of a lock's relock.acquire: the MultiLock's")
		}
	}
	assert.Equal(t, 2, children, "lock acquisitions under the MultiLock")
}

// spanRef is a span's ID and its parent's.
type spanRef struct{ id, parent string }

// TestLockNames: with WithLockNames every point and span has the name.
func TestLockNames(t *testing.T) {
	s := newSetup(t, relockotel.WithLockNames())
	c := relocktest.Client(t, rlock.WithObserver(s.obs))
	name := relocktest.Name(t)
	l := c.GetLock(name)
	require.NoError(t, l.Lock(t.Context()))
	require.NoError(t, l.Unlock(t.Context()))
	ms := s.collect(t)
	assert.EqualValues(t, 1, count(t, ms["relock.acquire.duration"], kv("relock.lock.name", name, "relock.outcome", "acquired")),
		"relock.acquire.duration{name=%s}", name)
	for _, set := range everyAttributeSet(ms) {
		v, _ := set.Value(relockotel.AttrName)
		assert.Equal(t, name, v.AsString(), "a point's relock.lock.name: %v", set.ToSlice())
	}
	for _, sp := range s.spans.Ended() {
		attrs := attribute.NewSet(sp.Attributes()...)
		v, _ := attrs.Value(relockotel.AttrName)
		assert.Equal(t, name, v.AsString(), "span %s's relock.lock.name", sp.Name())
	}
}

// TestGlobalProviders: New without providers uses the global ones (here
// the no-op defaults): it records nothing and costs no error.
func TestGlobalProviders(t *testing.T) {
	c := relocktest.Client(t, rlock.WithObserver(relockotel.New()))
	l := c.GetLock(relocktest.Name(t))
	require.NoError(t, l.Lock(t.Context()))
	require.NoError(t, l.Unlock(t.Context()))
	require.ErrorIs(t, l.Unlock(t.Context()), rlock.ErrNotHeld, "Unlock")
}

// TestContention: an acquisition that had to wait counts one in
// relock.waits and records its wait in relock.wait.duration; one that got
// the lock at once counts none.
func TestContention(t *testing.T) {
	s := newSetup(t)
	srv := redistest.Shared(t)
	c := relocktest.ClientOn(t, srv, rlock.WithObserver(s.obs))
	other := relocktest.ClientOn(t, srv)
	name := relocktest.Name(t)
	ctx := rlock.WithOwner(t.Context(), "me")
	otherCtx := rlock.WithOwner(t.Context(), "other")

	require.NoError(t, c.GetLock(name).Lock(ctx)) // uncontended
	require.NoError(t, c.GetLock(name).Unlock(ctx))
	assert.Zero(t, s.sumNow("relock.waits", nil), "relock.waits after an uncontended acquisition")

	require.NoError(t, other.GetLock(name).Lock(otherCtx))
	got := make(chan error, 1)
	go func() { got <- c.GetLock(name).Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "the wait to be counted", func() bool {
		return s.sumNow("relock.waits", kv("relock.lock.kind", "lock")) == 1
	})
	require.NoError(t, other.GetLock(name).Unlock(otherCtx))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock"))
	require.NoError(t, c.GetLock(name).Unlock(ctx))

	// A TryLock that waits and gives up counts too.
	require.NoError(t, other.GetLock(name).Lock(otherCtx))
	ok, err := c.GetLock(name).TryLock(ctx, 10*time.Millisecond, 0)
	require.NoError(t, err)
	require.False(t, ok)
	// One that makes a single attempt does not wait.
	ok, err = c.GetLock(name).TryLock(ctx, 0, 0)
	require.NoError(t, err)
	require.False(t, ok)
	require.NoError(t, other.GetLock(name).Unlock(otherCtx))

	ms := s.collect(t)
	waits := ms["relock.waits"]
	assert.Equal(t, "{wait}", waits.Unit, "relock.waits' unit")
	assert.True(t, waits.Data.(metricdata.Sum[int64]).IsMonotonic, "relock.waits must be a counter")
	assert.EqualValues(t, 2, sum(t, waits, kv("relock.lock.kind", "lock")), "relock.waits")
	wd := ms["relock.wait.duration"]
	assert.Equal(t, "s", wd.Unit, "relock.wait.duration's unit")
	assert.EqualValues(t, 2, count(t, wd, kv("relock.lock.kind", "lock")), "relock.wait.duration measurements")
	assert.EqualValues(t, 4, count(t, ms["relock.acquire.duration"], kv("relock.lock.kind", "lock")), "relock.acquire.duration measurements")
}

// TestDeadlocks: an acquisition whose error matches relock.ErrDeadlock
// (wrapped, as a broken wait returns it) counts one in relock.deadlocks;
// other errors count none.
func TestDeadlocks(t *testing.T) {
	s := newSetup(t)
	lock := observe.Lock{Kind: observe.KindLock, Name: "orders:1"}
	for _, err := range []error{
		fmt.Errorf("%w: %w: a holds orders:1 and waits for orders:2, b holds orders:2 and waits for orders:1", rlock.ErrNotAcquired, relock.ErrDeadlock),
		errors.New("relock: redis: connection refused"),
		nil,
	} {
		ctx := s.obs.AcquireStart(t.Context(), observe.Acquire{Lock: lock, Owner: "a"})
		outcome := observe.OutcomeError
		if err == nil {
			outcome = observe.OutcomeAcquired
		}
		s.obs.AcquireEnd(ctx, observe.Acquire{Lock: lock, Owner: "a", Outcome: outcome, Err: err})
	}
	ms := s.collect(t)
	d := ms["relock.deadlocks"]
	assert.Equal(t, "{deadlock}", d.Unit, "relock.deadlocks' unit")
	assert.EqualValues(t, 1, sum(t, d, kv("relock.lock.kind", "lock")), "relock.deadlocks")
}

// TestDeadlockCounted: a real deadlock, two owners on two Clients that
// each hold a lock and wait for the other's, is broken by ending one
// wait (rlock.WithDeadlockDetection), and that wait counts one in
// relock.deadlocks; the other wait, which then gets its lock, counts
// none.
func TestDeadlockCounted(t *testing.T) {
	s := newSetup(t)
	srv := redistest.Shared(t)
	const after = 200 * time.Millisecond
	ca := relocktest.ClientOn(t, srv, rlock.WithObserver(s.obs), rlock.WithDeadlockDetection(after))
	cb := relocktest.ClientOn(t, srv, rlock.WithObserver(s.obs), rlock.WithDeadlockDetection(after))
	l1, l2 := relocktest.Name(t), relocktest.Name(t)
	a := rlock.WithOwner(t.Context(), "a")
	b := rlock.WithOwner(t.Context(), "b")
	require.NoError(t, ca.GetLock(l1).Lock(a))
	require.NoError(t, cb.GetLock(l2).Lock(b))

	// Each waits for the other's lock, then releases what it holds.
	cross := func(c *rlock.Client, ctx context.Context, hold, want string) <-chan error {
		done := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			err := c.GetLock(want).Lock(wctx)
			if err == nil {
				err = c.GetLock(want).Unlock(ctx)
			}
			if uerr := c.GetLock(hold).Unlock(ctx); err == nil {
				err = uerr
			}
			done <- err
		}()
		return done
	}
	ea := cross(ca, a, l1, l2)
	eb := cross(cb, b, l2, l1)
	errA := relocktest.Receive(t, ea, 15*time.Second, "a's wait to end")
	errB := relocktest.Receive(t, eb, 15*time.Second, "b's wait to end")
	if errA != nil {
		require.ErrorIs(t, errA, relock.ErrDeadlock, "a's wait")
		require.NoError(t, errB, "b's wait, after a's ended")
	} else {
		require.ErrorIs(t, errB, relock.ErrDeadlock, "b's wait")
	}

	ms := s.collect(t)
	assert.EqualValues(t, 1, sum(t, ms["relock.deadlocks"], kv("relock.lock.kind", "lock")), "relock.deadlocks")
	assert.EqualValues(t, 2, sum(t, ms["relock.waits"], kv("relock.lock.kind", "lock")), "relock.waits")
}

// TestLockNameFunc: WithLockNameFunc puts the mapped name on every point
// and span, so that a family of names makes one series; a name mapped to
// "" has none.
func TestLockNameFunc(t *testing.T) {
	s := newSetup(t, relockotel.WithLockNameFunc(relockotel.LockNamePatterns("orders:*", "bad[")))
	c := relocktest.Client(t, rlock.WithObserver(s.obs))
	prefix := relocktest.Name(t)
	for _, name := range []string{"orders:1", "orders:2", "orders:3", "cron"} {
		l := c.GetLock(prefix + name)
		require.NoError(t, l.Lock(t.Context()))
		require.NoError(t, l.Unlock(t.Context()))
	}
	ms := s.collect(t)
	acq := ms["relock.acquire.duration"]
	assert.EqualValues(t, 0, count(t, acq, kv("relock.lock.name", "orders:*")), "names with the test's prefix are not orders:*")
	assert.EqualValues(t, 4, count(t, acq, kv("relock.lock.name", "other")), "relock.acquire.duration{name=other}")

	s = newSetup(t, relockotel.WithLockNameFunc(func(name string) string {
		if strings.HasPrefix(name, prefix+"orders:") {
			return "orders:*"
		}
		return ""
	}))
	c = relocktest.Client(t, rlock.WithObserver(s.obs))
	for _, name := range []string{"orders:1", "orders:2", "orders:3", "cron"} {
		l := c.GetLock(prefix + name)
		require.NoError(t, l.Lock(t.Context()))
		require.NoError(t, l.Unlock(t.Context()))
	}
	ms = s.collect(t)
	acq = ms["relock.acquire.duration"]
	assert.EqualValues(t, 3, count(t, acq, kv("relock.lock.name", "orders:*", "relock.outcome", "acquired")), "relock.acquire.duration{name=orders:*}")
	assert.EqualValues(t, 4, count(t, acq, kv("relock.lock.kind", "lock")), "relock.acquire.duration")
	for _, set := range everyAttributeSet(ms) {
		if v, ok := set.Value(relockotel.AttrName); ok {
			assert.Equal(t, "orders:*", v.AsString(), "a point's relock.lock.name: %v", set.ToSlice())
		}
	}
	var named, unnamed int
	for _, sp := range s.spans.Ended() {
		attrs := attribute.NewSet(sp.Attributes()...)
		if v, ok := attrs.Value(relockotel.AttrName); ok {
			assert.Equal(t, "orders:*", v.AsString(), "span %s's relock.lock.name", sp.Name())
			named++
		} else {
			unnamed++
		}
	}
	assert.Equal(t, 6, named, "spans of orders:*")
	assert.Equal(t, 2, unnamed, "spans of cron")
}

func TestLockNamePatterns(t *testing.T) {
	f := relockotel.LockNamePatterns("orders:*", "invoice:*:pdf", "[")
	for name, want := range map[string]string{
		"orders:42": "orders:*", "orders:": "orders:*", "invoice:7:pdf": "invoice:*:pdf",
		"invoice:7:html": "other", "cron": "other", "[": "other",
	} {
		assert.Equal(t, want, f(name), "label of %q", name)
	}
}
