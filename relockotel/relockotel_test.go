package relockotel_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/multilock"
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
	if err := s.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != relockotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, relockotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
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
	if !ok {
		t.Fatalf("%s is a %T, want a float64 histogram", m.Name, m.Data)
	}
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
	if !ok {
		t.Fatalf("%s is a %T, want an int64 sum", m.Name, m.Data)
	}
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
		if err := l.Lock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}

	// Not acquired: once at once, once after a wait.
	busy := relocktest.Name(t)
	otherCtx := rlock.WithOwner(t.Context(), "other")
	if err := other.GetLock(busy).Lock(otherCtx); err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
		if ok, err := c.GetLock(busy).TryLock(ctx, wait, 0); ok || err != nil {
			t.Fatalf("TryLock(%v) = %v, %v; want false, nil", wait, ok, err)
		}
	}
	// A waiter, counted while it waits, that gets the lock.
	got := make(chan error, 1)
	go func() { got <- c.GetLock(busy).Lock(ctx) }()
	relocktest.Eventually(t, 5*time.Second, "a waiter", func() bool {
		return sum(t, s.collect(t)["relock.waiters.active"], kv("relock.lock.kind", "lock")) == 1
	})
	if err := other.GetLock(busy).Unlock(otherCtx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if err := c.GetLock(busy).Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// An error: the key holds a string.
	wrong := relocktest.Name(t)
	if err := raw.Do(ctx, raw.B().Set().Key(wrong).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if ok, err := c.GetLock(wrong).TryLock(ctx, 0, 0); ok || err == nil {
		t.Fatalf("TryLock on a string key = %v, %v; want an error", ok, err)
	}

	// Renewed, then lost: the key is deleted under the holder.
	renewed := c.GetLock(relocktest.Name(t))
	if err := renewed.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	relocktest.Eventually(t, 5*time.Second, "a renewal", func() bool {
		return sum(t, s.collect(t)["relock.renewals"], kv("relock.outcome", "ok")) > 0
	})
	if err := raw.Do(ctx, raw.B().Del().Key(renewed.Name()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-renewed.Done(ctx):
	case <-time.After(5 * time.Second):
		t.Fatal("the loss was not noticed")
	}

	// A MultiLock of the Client's locks reports as multi.
	m := multilock.New(c.GetLock(relocktest.Name(t)), c.GetLock(relocktest.Name(t)))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	ms := s.collect(t)
	for _, name := range []string{"relock.acquire.duration", "relock.hold.duration", "relock.holds.active",
		"relock.waiters.active", "relock.renewals"} {
		if ms[name].Data == nil {
			t.Fatalf("no %s recorded", name)
		}
	}
	acq := ms["relock.acquire.duration"]
	if acq.Unit != "s" {
		t.Errorf("relock.acquire.duration unit %q, want s", acq.Unit)
	}
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
		if n := count(t, acq, kv("relock.lock.kind", tc.kind, "relock.outcome", tc.outcome)); n != tc.want {
			t.Errorf("relock.acquire.duration{kind=%s,outcome=%s}: %d measurements, want %d", tc.kind, tc.outcome, n, tc.want)
		}
	}
	h := acq.Data.(metricdata.Histogram[float64])
	bounds := h.DataPoints[0].Bounds
	for _, b := range []float64{.001, .005, .01, .05, .1, .5, 1, 5} {
		if !slices.Contains(bounds, b) {
			t.Errorf("relock.acquire.duration bounds %v lack %v", bounds, b)
		}
	}
	if bounds[0] != .001 || bounds[len(bounds)-1] != 30 {
		t.Errorf("relock.acquire.duration bounds %v: want 1ms to 30s", bounds)
	}

	hold := ms["relock.hold.duration"]
	if hold.Unit != "s" {
		t.Errorf("relock.hold.duration unit %q, want s", hold.Unit)
	}
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
		if n := count(t, hold, kv("relock.lock.kind", tc.kind, "relock.outcome", tc.outcome)); n != tc.want {
			t.Errorf("relock.hold.duration{kind=%s,outcome=%s}: %d, want %d", tc.kind, tc.outcome, n, tc.want)
		}
	}

	ren := ms["relock.renewals"]
	if ren.Unit != "{renewal}" || !ren.Data.(metricdata.Sum[int64]).IsMonotonic {
		t.Errorf("relock.renewals: unit %q, monotonic %v; want {renewal}, a counter", ren.Unit, ren.Data.(metricdata.Sum[int64]).IsMonotonic)
	}
	if n := sum(t, ren, kv("relock.lock.kind", "lock", "relock.outcome", "lost")); n != 1 {
		t.Errorf("relock.renewals{outcome=lost} = %d, want 1", n)
	}
	if n := sum(t, ren, kv("relock.outcome", "failed")); n != 0 {
		t.Errorf("relock.renewals{outcome=failed} = %d, want 0", n)
	}

	for name, unit := range map[string]string{"relock.holds.active": "{hold}", "relock.waiters.active": "{waiter}"} {
		m := ms[name]
		if m.Unit != unit || m.Data.(metricdata.Sum[int64]).IsMonotonic {
			t.Errorf("%s: unit %q, monotonic %v; want %s, an up-down counter", name, m.Unit, m.Data.(metricdata.Sum[int64]).IsMonotonic, unit)
		}
		for _, kind := range []string{"lock", "fenced", "fair", "multi"} {
			if n := sum(t, m, kv("relock.lock.kind", kind)); n != 0 {
				t.Errorf("%s{kind=%s} = %d after everything was released, want 0", name, kind, n)
			}
		}
	}
	if n := sum(t, ms["relock.waiters.active"], nil); n != 0 {
		t.Errorf("relock.waiters.active = %d, want 0", n)
	}

	for _, set := range everyAttributeSet(ms) {
		if _, ok := set.Value(relockotel.AttrName); ok {
			t.Errorf("a point has relock.lock.name without WithLockNames: %v", set.ToSlice())
		}
		if _, ok := set.Value(relockotel.AttrKind); !ok {
			t.Errorf("a point lacks relock.lock.kind: %v", set.ToSlice())
		}
	}

	// Spans: one relock.acquire per acquisition call, one relock.release
	// per Unlock, none with the lock name.
	var acquires, releases, errorSpans int
	for _, sp := range s.spans.Ended() {
		attrs := attribute.NewSet(sp.Attributes()...)
		if _, ok := attrs.Value(relockotel.AttrName); ok {
			t.Errorf("span %s has relock.lock.name without WithLockNames", sp.Name())
		}
		if _, ok := attrs.Value(relockotel.AttrKind); !ok {
			t.Errorf("span %s lacks relock.lock.kind", sp.Name())
		}
		outcome, ok := attrs.Value(relockotel.AttrOutcome)
		if !ok {
			t.Errorf("span %s lacks relock.outcome", sp.Name())
		}
		switch sp.Name() {
		case "relock.acquire":
			acquires++
		case "relock.release":
			releases++
		default:
			t.Errorf("unexpected span %q", sp.Name())
		}
		if outcome.AsString() == "error" {
			errorSpans++
			if sp.Status().Code != codes.Error || len(sp.Events()) == 0 {
				t.Errorf("span %s with outcome error: status %v, %d events; want Error and the recorded error", sp.Name(), sp.Status(), len(sp.Events()))
			}
		}
	}
	// Acquisitions: 3 kinds, 2 not acquired, the waiter, the error, the
	// renewed lock, the MultiLock and its 2 locks. Releases: 3 kinds, the
	// waiter's, the MultiLock and its 2 locks.
	if acquires != 3+2+1+1+1+3 || releases != 3+1+3 || errorSpans != 1 {
		t.Errorf("spans: %d relock.acquire, %d relock.release, %d errors; want 11, 7, 1", acquires, releases, errorSpans)
	}

	// A hold ended by Close.
	if err := c.GetLock(relocktest.Name(t)).Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ms = s.collect(t)
	if n := count(t, ms["relock.hold.duration"], kv("relock.outcome", "closed")); n != 1 {
		t.Errorf("relock.hold.duration{outcome=closed}: %d, want 1", n)
	}
	if n := sum(t, ms["relock.holds.active"], nil); n != 0 {
		t.Errorf("relock.holds.active = %d after Close, want 0", n)
	}
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
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
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
	if multiAcquire.parent != parent.SpanContext().SpanID().String() {
		t.Errorf("the MultiLock's relock.acquire has parent %s, want the caller's span %s", multiAcquire.parent, parent.SpanContext().SpanID())
	}
	for _, sp := range spans {
		attrs := attribute.NewSet(sp.Attributes()...)
		kind, _ := attrs.Value(relockotel.AttrKind)
		if sp.Name() == "relock.acquire" && kind.AsString() == "lock" {
			children++
			if sp.Parent().SpanID().String() != multiAcquire.id {
				t.Errorf("a lock's relock.acquire has parent %s, want the MultiLock's %s", sp.Parent().SpanID(), multiAcquire.id)
			}
		}
	}
	if children != 2 {
		t.Errorf("%d lock acquisitions under the MultiLock, want 2", children)
	}
}

// spanRef is a span's ID and its parent's.
type spanRef struct{ id, parent string }

// TestLockNames: with WithLockNames every point and span has the name.
func TestLockNames(t *testing.T) {
	s := newSetup(t, relockotel.WithLockNames())
	c := relocktest.Client(t, rlock.WithObserver(s.obs))
	name := relocktest.Name(t)
	l := c.GetLock(name)
	if err := l.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	ms := s.collect(t)
	if n := count(t, ms["relock.acquire.duration"], kv("relock.lock.name", name, "relock.outcome", "acquired")); n != 1 {
		t.Errorf("relock.acquire.duration{name=%s}: %d, want 1", name, n)
	}
	for _, set := range everyAttributeSet(ms) {
		if v, ok := set.Value(relockotel.AttrName); !ok || v.AsString() != name {
			t.Errorf("a point has relock.lock.name %q, want %q: %v", v.AsString(), name, set.ToSlice())
		}
	}
	for _, sp := range s.spans.Ended() {
		attrs := attribute.NewSet(sp.Attributes()...)
		if v, ok := attrs.Value(relockotel.AttrName); !ok || v.AsString() != name {
			t.Errorf("span %s has relock.lock.name %q, want %q", sp.Name(), v.AsString(), name)
		}
	}
}

// TestGlobalProviders: New without providers uses the global ones (here
// the no-op defaults): it records nothing and costs no error.
func TestGlobalProviders(t *testing.T) {
	c := relocktest.Client(t, rlock.WithObserver(relockotel.New()))
	l := c.GetLock(relocktest.Name(t))
	if err := l.Lock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(t.Context()); !errors.Is(err, rlock.ErrNotHeld) {
		t.Fatalf("Unlock = %v, want ErrNotHeld", err)
	}
}
