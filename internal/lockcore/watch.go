package lockcore

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/backoff"
	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
)

// A watch tells a caller who takes and leaves a lock it need not hold.
// It listens, through the Client's hub, on the channel the lock's
// releases are published on and on the keyspace notifications of the
// lock's hash (when the server sends them), and on every notification
// reads the hash's holders once (HGETALL) and reports the difference from
// its last read: holders that came (acquired), and holders that left
// (released, expired, or left unheard). Notifications that come while a
// read is in flight merge into the next read.

// WatchEventType says what a watch saw happen to one holder.
type WatchEventType int

// The events of a watch.
const (
	// WatchAcquired: a holder that the last read did not find.
	WatchAcquired WatchEventType = iota + 1
	// WatchReleased: a holder gone after a release was heard (the lock's
	// channel, or a keyspace hdel or del).
	WatchReleased
	// WatchExpired: a holder gone after the key's expiry was heard.
	WatchExpired
	// WatchVanished: a holder gone with nothing heard that says why: an
	// expiry without keyspace notifications, or while the subscription
	// connection was down.
	WatchVanished
)

// WatchEvent is one holder's change, as a watch reports it.
type WatchEvent struct {
	Type     WatchEventType
	ClientID string
	Owner    string // without a read-write lock's ":write"
	Write    bool   // a read-write lock's write hold
	At       time.Time
}

// ReleaseChanneler is implemented by a Kind whose releases are published
// on another channel than layout.Channel(name) ("" when on no channel a
// watch can hear: the fair lock's go to the next waiter's own).
type ReleaseChanneler interface {
	ReleaseChannel(name string) string
}

// WatchInfo is what a watch found out when it started.
type WatchInfo struct {
	// Keyspace says that the server sends the keyspace notifications a
	// watch needs (CONFIG GET notify-keyspace-events has K, and h and x
	// or A) and that the watch listens to them.
	Keyspace bool
}

// watch is one running watch.
type watch struct {
	m    *Mutex
	emit func(context.Context, WatchEvent) bool // false: stop
	end  func()                                 // called when the watch ends
	rw   bool

	kick   chan struct{} // 1-buffered
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	released bool // a release was heard since the last take
	expired  bool // an expiry was heard since the last take
	missed   bool // a message may have been missed since the last take
	hash     bool // a keyspace notification of a hash command was heard

	// hashHeard: the watch has heard keyspace notifications of the hash,
	// so acquisitions are heard (run's own).
	hashHeard bool
}

// watchKeyspaceEvents are the keyspace notifications of a lock's hash
// that make a watch read it: a hold taken, re-entered or released (the
// hash commands), deleted, expired or evicted. Lease renewals (pexpire)
// are not among them.
var watchKeyspaceEvents = map[string]int{
	"hincrby": 0, "hset": 0, "hsetnx": 0,
	"hdel": 1, "del": 1,
	"expired": 2, "evicted": 2,
}

// Watch starts a watch of the lock: emit is called, on the watch's own
// goroutine, with the watch's context (ended when the watch ends) and each
// change it sees, until ctx ends, emit returns false, the returned stop is
// called, or the Client closes. emit may block until its context ends;
// the notifications that come meanwhile merge into one read. Watch
// returns once the watch listens (a change made after it returns is seen)
// and its first read (what later reads are compared with) is done; on
// error nothing is left running. end, when set, is called once the watch
// has ended, after its last emit. stop ends the watch and waits for its
// goroutine.
func (m *Mutex) Watch(ctx context.Context, emit func(context.Context, WatchEvent) bool, end func()) (WatchInfo, func(), error) {
	if err := m.check(); err != nil {
		return WatchInfo{}, nil, err
	}
	if err := ctx.Err(); err != nil {
		return WatchInfo{}, nil, err
	}
	c := m.core
	w := &watch{m: m, emit: emit, end: end, kick: make(chan struct{}, 1), done: make(chan struct{})}
	l := label(m.kind)
	w.rw = l == observe.KindRead || l == observe.KindWrite
	var info WatchInfo
	var ls []*pubsub.Waiter
	leave := func() {
		for _, x := range ls {
			x.Leave(false)
		}
	}
	channel := m.channel
	if rc, ok := m.kind.(ReleaseChanneler); ok {
		channel = rc.ReleaseChannel(m.name)
	}
	if channel != "" {
		x, err := c.Hub.ListenPayload(ctx, channel, func(msg string) {
			if msg == layout.UnlockMessage || msg == layout.WakeAllMessage || msg == layout.GrantedMessage {
				w.heard(1, false)
			} else {
				w.heard(0, false)
			}
		}, w.lost)
		if err != nil {
			return info, nil, c.closedOr(err)
		}
		ls = append(ls, x)
	}
	if ks, on := c.keyspaceChannel(ctx, m.name); ks != "" {
		x, err := c.Hub.ListenPayload(ctx, ks, func(event string) {
			if what, ok := watchKeyspaceEvents[event]; ok {
				w.heard(what, true)
			}
		}, w.lost)
		var refused *rueidis.RedisError
		switch {
		case errors.As(err, &refused):
			// The server refused the channel (an ACL): the watch goes on
			// without keyspace notifications.
		case err != nil:
			leave()
			return info, nil, c.closedOr(err)
		default:
			ls = append(ls, x)
			info.Keyspace = on
		}
	}
	base, err := w.read(ctx)
	if err != nil {
		leave()
		return info, nil, c.closedOr(err)
	}
	c.mu.Lock()
	if err := c.CheckOpen(); err != nil {
		c.mu.Unlock()
		leave()
		return info, nil, err
	}
	if c.watches == nil {
		c.watches = make(map[*watch]struct{})
	}
	var rctx context.Context
	rctx, w.cancel = context.WithCancel(ctx)
	c.watches[w] = struct{}{}
	c.mu.Unlock()
	go w.run(rctx, base, ls)
	stop := func() {
		w.cancel()
		<-w.done
	}
	return info, stop, nil
}

// heard records a notification (0 a change, 1 a release, 2 an expiry;
// keyspace for a keyspace notification) and wakes the watch. It runs on
// the hub's reader: it never blocks.
func (w *watch) heard(what int, keyspace bool) {
	w.mu.Lock()
	switch what {
	case 1:
		w.released = true
	case 2:
		w.expired = true
	}
	w.hash = w.hash || keyspace
	w.mu.Unlock()
	w.poke()
}

// lost records that a message may have been missed (the subscription was
// made again) and wakes the watch.
func (w *watch) lost() {
	w.mu.Lock()
	w.missed = true
	w.mu.Unlock()
	w.poke()
}

func (w *watch) poke() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// watchRetry spaces the reads of a watch whose read failed.
var watchRetry = backoff.Policy{Min: 100 * time.Millisecond, Max: 2 * time.Second}

// run reads the lock at every notification and emits the changes, until
// the watch ends.
func (w *watch) run(rctx context.Context, last map[string]bool, ls []*pubsub.Waiter) {
	c := w.m.core
	defer func() {
		w.cancel()
		for _, x := range ls {
			x.Leave(false)
		}
		c.mu.Lock()
		delete(c.watches, w)
		c.mu.Unlock()
		if w.end != nil {
			w.end()
		}
		close(w.done)
	}()
	var retry *time.Timer
	failures := 0
	var releasedAt, expiredAt time.Time // when evidence not yet used was heard
	for {
		var again <-chan time.Time
		if retry != nil {
			again = retry.C
		}
		select {
		case <-w.kick:
		case <-again:
		case <-rctx.Done():
			return
		}
		if retry != nil {
			retry.Stop()
			retry = nil
		}
		now, err := w.read(rctx)
		if err != nil {
			if rctx.Err() != nil {
				return
			}
			// What was heard stays for the next read.
			retry = time.NewTimer(watchRetry.Delay(failures))
			failures++
			continue
		}
		failures = 0
		// What was heard is taken after the read, so that it covers the
		// changes the read sees; but the notification of a change can
		// come after the read's reply (another connection). A holder
		// gone with nothing heard yet waits a moment for what says why.
		released, expired, missed, keyspace := w.take()
		// Evidence heard before a read that did not yet see its change
		// (the notification came before the read's reply) counts for the
		// next read, for a while.
		if released {
			releasedAt = time.Now()
		}
		if expired {
			expiredAt = time.Now()
		}
		released = time.Since(releasedAt) < watchEvidenceKept
		expired = time.Since(expiredAt) < watchEvidenceKept
		if !released && !expired && !missed && gone(last, now) {
			evidence := time.NewTimer(watchEvidence)
		wait:
			for {
				select {
				case <-w.kick:
					r, e, m, k := w.take()
					released, expired, missed, keyspace = released || r, expired || e, missed || m, keyspace || k
					if released || expired || missed {
						break wait
					}
				case <-evidence.C:
					break wait
				case <-rctx.Done():
					evidence.Stop()
					return
				}
			}
			evidence.Stop()
			w.poke() // what came meanwhile may have changed the holders
		}
		if keyspace {
			w.hashHeard = true
		}
		if gone(last, now) || len(now) == 0 {
			releasedAt, expiredAt = time.Time{}, time.Time{} // used
		}
		for _, ev := range w.diff(last, now, released, expired && len(now) == 0, !w.hashHeard) {
			if !w.emit(rctx, ev) {
				return
			}
		}
		last = now
	}
}

// take returns and clears what was heard since the last take: a release,
// an expiry, a message that may have been missed, and a keyspace
// notification of a hash command.
func (w *watch) take() (released, expired, missed, hash bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	released, expired, missed, hash = w.released, w.expired, w.missed, w.hash
	w.released, w.expired, w.missed, w.hash = false, false, false, false
	return
}

// gone reports whether a holder of before is not in after.
func gone(before, after map[string]bool) bool {
	for f := range before {
		if !after[f] {
			return true
		}
	}
	return false
}

// watchEvidence is how long a watch that found a holder gone waits for
// the notification that says why (a release, an expiry) before it
// reports the holder vanished.
const watchEvidence = 250 * time.Millisecond

// watchEvidenceKept is how long a release or an expiry heard before the
// read that sees its change still explains a holder gone.
const watchEvidenceKept = time.Second

// read returns the holder fields of the lock's hash.
func (w *watch) read(ctx context.Context) (map[string]bool, error) {
	fields, err := w.m.core.RDB.Do(ctx, w.m.core.RDB.B().Hkeys().Key(w.m.name).Build()).AsStrSlice()
	if err != nil {
		return nil, err
	}
	holders := make(map[string]bool, len(fields))
	for _, f := range fields {
		if layout.IsHolderField(f) {
			holders[f] = true
		}
	}
	return holders, nil
}

// diff returns the events that lead from the holders before to those
// after: a holder gone is expired when the key's expiry was heard (and
// the key is gone), released when a release was heard, else vanished.
// A release heard that frees the lock when no holder was known to leave
// is a release of an unknown holder, when unknown says that acquisitions
// are not heard (no keyspace notifications of the hash came).
func (w *watch) diff(before, after map[string]bool, released, expired, unknown bool) []WatchEvent {
	var evs []WatchEvent
	at := time.Now()
	gone := WatchVanished
	switch {
	case expired:
		gone = WatchExpired
	case released:
		gone = WatchReleased
	}
	for _, f := range sortedKeys(before) {
		if !after[f] {
			evs = append(evs, w.event(gone, f, at))
		}
	}
	if unknown && len(evs) == 0 && released && !expired && len(after) == 0 {
		evs = append(evs, WatchEvent{Type: WatchReleased, At: at})
	}
	for _, f := range sortedKeys(after) {
		if !before[f] {
			evs = append(evs, w.event(WatchAcquired, f, at))
		}
	}
	return evs
}

func (w *watch) event(t WatchEventType, field string, at time.Time) WatchEvent {
	id, owner := layout.SplitField(field)
	ev := WatchEvent{Type: t, ClientID: id, Owner: owner, At: at}
	if w.rw {
		if o, ok := strings.CutSuffix(owner, ":write"); ok {
			ev.Owner, ev.Write = o, true
		}
	}
	return ev
}

func sortedKeys(m map[string]bool) []string { return slices.Sorted(maps.Keys(m)) }

// keyspaceChannel is the keyspace channel of key that a watch listens on
// ("" when it cannot hear it: on a Cluster, whose notifications stay on
// the node of the key, and with sharded pub/sub), and whether the server
// says it sends the notifications a watch needs. It asks the server its
// database (CLIENT INFO; 0 when refused) and its notify-keyspace-events
// (CONFIG GET; when refused, the watch listens all the same, and hears
// the notifications if they are on). It never changes the server's
// configuration.
func (c *Core) keyspaceChannel(ctx context.Context, key string) (string, bool) {
	if c.RDB.Mode() == rueidis.ClientModeCluster || c.publish == "spublish" {
		return "", false
	}
	res := c.RDB.DoMulti(ctx, c.RDB.B().ClientInfo().Build(),
		c.RDB.B().ConfigGet().Parameter("notify-keyspace-events").Build())
	db := 0
	if info, err := res[0].ToString(); err == nil {
		for _, f := range strings.Fields(info) {
			if v, ok := strings.CutPrefix(f, "db="); ok {
				if n, err := strconv.Atoi(v); err == nil {
					db = n
				}
			}
		}
	}
	on := false
	if m, err := res[1].AsStrMap(); err == nil {
		on = KeyspaceFlagsOn(m["notify-keyspace-events"])
	}
	return "__keyspace@" + strconv.Itoa(db) + "__:" + key, on
}

// KeyspaceFlagsOn reports whether notify-keyspace-events flags make the
// server send what a watch needs: keyspace notifications (K) of hash
// commands (h) and expiries (x), or of every class (A).
func KeyspaceFlagsOn(flags string) bool {
	return strings.Contains(flags, "K") &&
		(strings.Contains(flags, "A") || strings.Contains(flags, "h") && strings.Contains(flags, "x"))
}

// stopWatches ends every watch of the Client and waits for them.
func (c *Core) stopWatches() {
	c.mu.Lock()
	ws := make([]*watch, 0, len(c.watches))
	for w := range c.watches {
		ws = append(ws, w)
		w.cancel()
	}
	c.mu.Unlock()
	for _, w := range ws {
		<-w.done
	}
}
