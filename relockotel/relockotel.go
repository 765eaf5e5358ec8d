// Package relockotel records the life of relock's locks as OpenTelemetry
// metrics and spans. It is a module of its own, so that relock itself
// stays free of OpenTelemetry:
//
//	obs := relockotel.New() // the global MeterProvider and TracerProvider
//	c, err := rlock.NewClient(opt, rlock.WithObserver(obs))
//
// # Metrics
//
// Every point has the attribute relock.lock.kind (lock, fenced, fair,
// spin, read, write, semaphore, counting_semaphore, rate_limiter, multi,
// redlock), and relock.lock.name when WithLockNames or WithLockNameFunc
// is given. Names are off by default: lock names are often unbounded, one
// per order or per user, and each name makes new series. Between no names
// and every name, WithLockNameFunc maps each name to a label of a small
// set (LockNamePatterns maps "orders:42" to "orders:*").
//
//	relock.acquire.duration  histogram, s       time an acquisition call took (see Spans for
//	                                            which calls), by relock.outcome:
//	                                            acquired, not_acquired (busy until the wait or the
//	                                            context ended), error (Redis failed, Close...)
//	relock.hold.duration     histogram, s       how long holds lasted, by relock.outcome:
//	                                            released, lost, closed
//	relock.holds.active      up-down counter, {hold}    holds now held through this process
//	relock.waiters.active    up-down counter, {waiter}  acquisitions now waiting
//	relock.renewals          counter, {renewal}  watchdog renewals, by relock.outcome:
//	                                            ok, failed (retried), lost
//	relock.waits             counter, {wait}    acquisitions that had to wait (contention):
//	                                            one for each call whose first attempt was
//	                                            refused and that could wait, counted when
//	                                            its wait begins
//	relock.wait.duration     histogram, s       how long those waits lasted, recorded when
//	                                            the call returns (acquired or not)
//	relock.deadlocks         counter, {deadlock} waits ended to break a deadlock: the
//	                                            acquisitions whose error matches
//	                                            relock.ErrDeadlock (one per cycle broken)
//
// The share of contended acquisitions is relock.waits over the count of
// relock.acquire.duration.
// The acquire and wait histograms' buckets go from 1ms to 30s; the hold
// histogram's from 1ms to 1h.
//
// # Spans
//
// relock.acquire covers each acquisition call: Lock, LockLease, TryLock,
// Acquire, TryAcquire, the acquisition of Do and TryDo, a semaphore's
// Acquire, TryAcquire, AcquirePermit and TryAcquirePermit, and a counting
// semaphore's and a rate limiter's Acquire and TryAcquire; relock.release
// each release: Unlock, Hold.Release, a permit's Release, a counting
// semaphore's Release, the release of Do and TryDo (a counting
// semaphore's permits are not holds: no Client knows who has them). Both
// come with the attributes relock.lock.kind, relock.outcome and, with
// WithLockNames or WithLockNameFunc, relock.lock.name. A span whose outcome is error records the error and
// has status Error. The Redis calls an acquisition makes run in the
// context of its span, so a traced Redis client (rueidisotel) puts them
// under it; the locks of a MultiLock or a RedLock have their spans under
// the MultiLock's.
package relockotel

import (
	"context"
	"errors"
	"path"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/observe"
)

// ScopeName is the instrumentation scope of the meter and the tracer.
const ScopeName = "github.com/relock-go/relock/relockotel"

// Attribute keys.
const (
	AttrKind    = attribute.Key("relock.lock.kind")
	AttrName    = attribute.Key("relock.lock.name")
	AttrOutcome = attribute.Key("relock.outcome")
)

// AcquireBuckets are the bucket boundaries of relock.acquire.duration, in
// seconds.
var AcquireBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// HoldBuckets are the bucket boundaries of relock.hold.duration, in
// seconds.
var HoldBuckets = []float64{.001, .005, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600}

// Observer records the events of relock's locks as metrics and spans. It
// satisfies rlock.Observer (observe.Observer). Make one with New and give
// it to every Client (rlock.WithObserver); it is safe for concurrent use.
type Observer struct {
	tracer trace.Tracer
	names  bool
	// label maps a lock name to its relock.lock.name (WithLockNameFunc).
	label func(name string) string

	acquireDuration metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	holdsActive     metric.Int64UpDownCounter
	waitersActive   metric.Int64UpDownCounter
	renewals        metric.Int64Counter
	waits           metric.Int64Counter
	waitDuration    metric.Float64Histogram
	deadlocks       metric.Int64Counter

	// sets caches, per kind (and label, with WithLockNameFunc), the
	// attribute sets of the points without a full lock name (a
	// copy-on-write map: reads take no lock).
	sets   atomic.Pointer[map[setKey]*kindSets]
	setsMu sync.Mutex
}

var _ observe.Observer = (*Observer)(nil)

// Option configures an Observer.
type Option func(*config)

type config struct {
	mp    metric.MeterProvider
	tp    trace.TracerProvider
	names bool
	label func(name string) string
}

// WithMeterProvider sets the MeterProvider the instruments come from. The
// default (and nil) is the global one, otel.GetMeterProvider().
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithTracerProvider sets the TracerProvider the spans come from. The
// default (and nil) is the global one, otel.GetTracerProvider().
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithLockNames adds the attribute relock.lock.name, the lock's name, to
// every point and span. The default is without: each lock name makes new
// series, so use it only with a small, fixed set of names. It overrides
// WithLockNameFunc.
func WithLockNames() Option {
	return func(c *config) { c.names = true }
}

// WithLockNameFunc adds the attribute relock.lock.name to every point and
// span, with the value f returns for the lock's name (for a MultiLock,
// its Name, "multilock[<names>]"); when f returns "", the point has no
// name. It is the way between no names and every name: f maps the names
// of unbounded families to one value each ("orders:42" to "orders:*"), so
// that the series stay as few as f's values. LockNamePatterns makes such
// an f from patterns. f is called on every event, on the goroutine of the
// call it reports: it must be quick, safe for concurrent use, and return
// values of a small set (the attribute sets of the first 1000 values are
// kept; beyond them every point costs a new set). A nil f is no option.
func WithLockNameFunc(f func(name string) string) Option {
	return func(c *config) { c.label = f }
}

// LockNamePatterns returns a function for WithLockNameFunc that maps a
// lock name to the first pattern it matches (path.Match's syntax: '*'
// is any run of characters but '/', '?' one character, [...] a class),
// and to "other" when it matches none, so that no name goes unseen and
// the labels are at most len(patterns)+1. With "orders:*" and
// "invoice:*:pdf", "orders:42" is "orders:*", "invoice:7:pdf" is
// "invoice:*:pdf" and "cron" is "other". A malformed pattern matches
// nothing.
func LockNamePatterns(patterns ...string) func(name string) string {
	ps := append([]string(nil), patterns...)
	return func(name string) string {
		for _, p := range ps {
			if ok, err := path.Match(p, name); ok && err == nil {
				return p
			}
		}
		return "other"
	}
}

// New returns an Observer that records on the providers of opts. An
// instrument the meter cannot make is reported to otel.Handle and
// replaced by one that records nothing.
func New(opts ...Option) *Observer {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	meter := cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(version))
	o := &Observer{tracer: cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version)), names: cfg.names}
	if !cfg.names {
		o.label = cfg.label
	}
	var err error
	handle := func(e error) {
		if e != nil {
			otel.Handle(e)
		}
	}
	o.acquireDuration, err = meter.Float64Histogram("relock.acquire.duration",
		metric.WithUnit("s"),
		metric.WithDescription("Time a lock acquisition call took, by outcome (acquired, not_acquired, error)."),
		metric.WithExplicitBucketBoundaries(AcquireBuckets...))
	handle(err)
	o.holdDuration, err = meter.Float64Histogram("relock.hold.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long holds lasted, by outcome (released, lost, closed)."),
		metric.WithExplicitBucketBoundaries(HoldBuckets...))
	handle(err)
	o.holdsActive, err = meter.Int64UpDownCounter("relock.holds.active",
		metric.WithUnit("{hold}"),
		metric.WithDescription("Holds held now."))
	handle(err)
	o.waitersActive, err = meter.Int64UpDownCounter("relock.waiters.active",
		metric.WithUnit("{waiter}"),
		metric.WithDescription("Acquisitions waiting now."))
	handle(err)
	o.renewals, err = meter.Int64Counter("relock.renewals",
		metric.WithUnit("{renewal}"),
		metric.WithDescription("Watchdog lease renewals, by outcome (ok, failed, lost)."))
	handle(err)
	o.waits, err = meter.Int64Counter("relock.waits",
		metric.WithUnit("{wait}"),
		metric.WithDescription("Acquisitions that had to wait: their first attempt found the lock taken."))
	handle(err)
	o.waitDuration, err = meter.Float64Histogram("relock.wait.duration",
		metric.WithUnit("s"),
		metric.WithDescription("How long acquisitions waited, from their first refused attempt to their return."),
		metric.WithExplicitBucketBoundaries(AcquireBuckets...))
	handle(err)
	o.deadlocks, err = meter.Int64Counter("relock.deadlocks",
		metric.WithUnit("{deadlock}"),
		metric.WithDescription("Waits ended to break a deadlock (errors matching relock.ErrDeadlock)."))
	handle(err)
	empty := map[setKey]*kindSets{}
	o.sets.Store(&empty)
	return o
}

// version is the instrumentation version.
const version = "0.1.0"

// setKey names the cached attribute sets of a kind, with a label (""
// for none).
type setKey struct{ kind, label string }

// maxLabels bounds the attribute sets kept for the labels of
// WithLockNameFunc.
const maxLabels = 1000

// kindSets are the options of the points of one kind (and label) without
// a full lock name, made once: the slices are passed as they are, so recording a point
// allocates no option slice.
type kindSets struct {
	kindAttr   attribute.KeyValue
	base       []attribute.KeyValue                      // kind, and the label when there is one
	add        []metric.AddOption                        // kind
	rec        []metric.RecordOption                     // kind
	outcomeRec map[observe.Outcome][]metric.RecordOption // kind and outcome
	outcomeAdd map[observe.Outcome][]metric.AddOption
	outcomeKV  map[observe.Outcome]attribute.KeyValue
	spanStart  []trace.SpanStartOption
}

var outcomes = []observe.Outcome{
	observe.OutcomeAcquired, observe.OutcomeNotAcquired, observe.OutcomeError,
	observe.OutcomeReleased, observe.OutcomeNotHeld, observe.OutcomeLost, observe.OutcomeClosed,
	observe.OutcomeOK, observe.OutcomeFailed,
}

// setsOf returns the cached options of a point of lock: by its kind, and
// by its label with WithLockNameFunc.
func (o *Observer) setsOf(lock observe.Lock) *kindSets {
	key := setKey{kind: lock.Kind}
	if o.label != nil {
		key.label = o.label(lock.Name)
	}
	if s := (*o.sets.Load())[key]; s != nil {
		return s
	}
	o.setsMu.Lock()
	defer o.setsMu.Unlock()
	old := *o.sets.Load()
	if s := old[key]; s != nil {
		return s
	}
	s := newKindSets(key)
	if key.label != "" && len(old) >= maxLabels {
		return s // too many labels: not kept
	}
	next := make(map[setKey]*kindSets, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[key] = s
	o.sets.Store(&next)
	return s
}

// newKindSets makes the options of the points of key.
func newKindSets(key setKey) *kindSets {
	kv := AttrKind.String(key.kind)
	base := []attribute.KeyValue{kv}
	if key.label != "" {
		base = append(base, AttrName.String(key.label))
	}
	with := func(more ...attribute.KeyValue) attribute.Set {
		return attribute.NewSet(append(append([]attribute.KeyValue(nil), base...), more...)...)
	}
	plain := metric.WithAttributeSet(with())
	s := &kindSets{
		kindAttr:   kv,
		add:        []metric.AddOption{plain},
		rec:        []metric.RecordOption{plain},
		outcomeRec: make(map[observe.Outcome][]metric.RecordOption, len(outcomes)),
		outcomeAdd: make(map[observe.Outcome][]metric.AddOption, len(outcomes)),
		outcomeKV:  make(map[observe.Outcome]attribute.KeyValue, len(outcomes)),
		spanStart:  []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(base...)},
	}
	s.base = base
	for _, oc := range outcomes {
		okv := AttrOutcome.String(string(oc))
		set := metric.WithAttributeSet(with(okv))
		s.outcomeRec[oc] = []metric.RecordOption{set}
		s.outcomeAdd[oc] = []metric.AddOption{set}
		s.outcomeKV[oc] = okv
	}
	return s
}

// named returns the attribute set of a point of lock (and outcome, unless
// ""), with the lock's name.
func named(lock observe.Lock, outcome observe.Outcome) metric.MeasurementOption {
	kvs := []attribute.KeyValue{AttrKind.String(lock.Kind), AttrName.String(lock.Name)}
	if outcome != "" {
		kvs = append(kvs, AttrOutcome.String(string(outcome)))
	}
	return metric.WithAttributeSet(attribute.NewSet(kvs...))
}

// record options of a point of lock with outcome.
func (o *Observer) record(lock observe.Lock, outcome observe.Outcome) []metric.RecordOption {
	if o.names {
		return []metric.RecordOption{named(lock, outcome)}
	}
	s := o.setsOf(lock)
	if outcome == "" {
		return s.rec
	}
	if opts, ok := s.outcomeRec[outcome]; ok {
		return opts
	}
	return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(s.base[:len(s.base):len(s.base)], AttrOutcome.String(string(outcome)))...))}
}

// add options of a point of lock, with outcome unless "".
func (o *Observer) add(lock observe.Lock, outcome observe.Outcome) []metric.AddOption {
	if o.names {
		return []metric.AddOption{named(lock, outcome)}
	}
	s := o.setsOf(lock)
	if outcome == "" {
		return s.add
	}
	if opts, ok := s.outcomeAdd[outcome]; ok {
		return opts
	}
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(s.base[:len(s.base):len(s.base)], AttrOutcome.String(string(outcome)))...))}
}

// startSpan starts the span name for lock.
func (o *Observer) startSpan(ctx context.Context, name string, lock observe.Lock) context.Context {
	s := o.setsOf(lock)
	opts := s.spanStart
	if o.names {
		opts = append(opts[:len(opts):len(opts)], trace.WithAttributes(AttrName.String(lock.Name)))
	}
	ctx, _ = o.tracer.Start(ctx, name, opts...)
	return ctx
}

// endSpan ends the span in ctx with outcome and err.
func (o *Observer) endSpan(ctx context.Context, lock observe.Lock, outcome observe.Outcome, err error) {
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		s := o.setsOf(lock)
		kv, ok := s.outcomeKV[outcome]
		if !ok {
			kv = AttrOutcome.String(string(outcome))
		}
		span.SetAttributes(kv)
		if outcome == observe.OutcomeError && err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// AcquireStart starts the span relock.acquire.
func (o *Observer) AcquireStart(ctx context.Context, a observe.Acquire) context.Context {
	return o.startSpan(ctx, "relock.acquire", a.Lock)
}

// AcquireEnd records relock.acquire.duration, counts relock.deadlocks
// when the call's error matches relock.ErrDeadlock, and ends the span.
func (o *Observer) AcquireEnd(ctx context.Context, a observe.Acquire) {
	o.acquireDuration.Record(ctx, a.Duration.Seconds(), o.record(a.Lock, a.Outcome)...)
	if a.Err != nil && errors.Is(a.Err, relock.ErrDeadlock) {
		o.deadlocks.Add(ctx, 1, o.add(a.Lock, "")...)
	}
	o.endSpan(ctx, a.Lock, a.Outcome, a.Err)
}

// ReleaseStart starts the span relock.release.
func (o *Observer) ReleaseStart(ctx context.Context, r observe.Release) context.Context {
	return o.startSpan(ctx, "relock.release", r.Lock)
}

// ReleaseEnd ends the span.
func (o *Observer) ReleaseEnd(ctx context.Context, r observe.Release) {
	o.endSpan(ctx, r.Lock, r.Outcome, r.Err)
}

// HoldStart adds one to relock.holds.active.
func (o *Observer) HoldStart(h observe.Hold) {
	o.holdsActive.Add(context.Background(), 1, o.add(h.Lock, "")...)
}

// HoldEnd takes one from relock.holds.active and records
// relock.hold.duration.
func (o *Observer) HoldEnd(h observe.Hold) {
	ctx := context.Background()
	o.holdsActive.Add(ctx, -1, o.add(h.Lock, "")...)
	o.holdDuration.Record(ctx, h.Held.Seconds(), o.record(h.Lock, h.Outcome)...)
}

// Renewal counts relock.renewals.
func (o *Observer) Renewal(r observe.Renewal) {
	o.renewals.Add(context.Background(), 1, o.add(r.Lock, r.Outcome)...)
}

// WaitStart adds one to relock.waiters.active and counts relock.waits.
func (o *Observer) WaitStart(ctx context.Context, w observe.Wait) {
	opts := o.add(w.Lock, "")
	o.waitersActive.Add(ctx, 1, opts...)
	o.waits.Add(ctx, 1, opts...)
}

// WaitEnd takes one from relock.waiters.active and records
// relock.wait.duration.
func (o *Observer) WaitEnd(ctx context.Context, w observe.Wait) {
	o.waitersActive.Add(ctx, -1, o.add(w.Lock, "")...)
	o.waitDuration.Record(ctx, w.Waited.Seconds(), o.record(w.Lock, "")...)
}
