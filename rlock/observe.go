package rlock

import (
	"log/slog"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/observe"
)

// Observer is told of the life of a Client's locks: every acquisition and
// release (with a start, so that a span can cover it), every hold from its
// start to its end (released, lost or closed), every renewal of a watchdog
// lease, and every wait. Package observe documents the events and when
// they come; the module github.com/relock-go/relock/relockotel provides
// an Observer that records them as OpenTelemetry metrics and spans.
//
// Calls are synchronous: an Observer must be safe for concurrent use,
// return quickly and never call back into the locks.
type Observer = observe.Observer

// WithObserver sets the Observer told of the life of every lock of the
// Client: Lock, FencedLock, fair locks, both sides of read-write locks,
// semaphore permits, and MultiLocks and RedLocks made of them (see
// multilock). The default is none: with no observer and
// no logger, no event is built and the calls cost nothing more.
func WithObserver(o Observer) Option {
	return func(c *lockcore.Config) { c.Observer = o }
}

// WithLogger sets a logger for what an operator must hear of: a waiting
// acquisition whose attempts fail (Redis unreachable, failing over,
// loading) logs one WARN when the failures begin, not one per retry, and
// one INFO when Redis answers again; a lost hold logs an ERROR. Nothing is
// logged on the way of a lock that works. The default is no logging.
func WithLogger(l *slog.Logger) Option {
	return func(c *lockcore.Config) { c.Logger = l }
}
