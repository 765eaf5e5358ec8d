package pubsub

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/backoff"
)

// Wake says which local waiters of a channel a message wakes.
type Wake int

const (
	// WakeOne wakes the longest-waiting local waiter of the channel that has
	// no wake-up pending yet. If every waiter already has one, the message
	// changes nothing.
	WakeOne Wake = iota
	// WakeAll wakes every local waiter of the channel.
	WakeAll
	// Ignore wakes nobody.
	Ignore
	// Mute wakes nobody, and makes the next message on the channel wake
	// nobody either when it would wake one waiter (WakeOne): for a
	// publisher that sends two messages in a row (one script), the first
	// telling some subscribers that the second is not for them. Listeners
	// are called for both. A lost connection ends the mute (the hub wakes
	// every waiter then anyway).
	Mute
)

// ErrClosed is returned by [Hub.Subscribe] once the hub is closed.
var ErrClosed = errors.New("pubsub: hub closed")

// DefaultLinger is the linger used when [Options.Linger] is zero.
const DefaultLinger = 200 * time.Millisecond

const (
	// maxBatch bounds the channels named by one SUBSCRIBE or UNSUBSCRIBE.
	maxBatch = 1000
)

// reconnect is the delay before reconnecting after a failure: a dropped
// connection is made again at once, then the delay doubles from 10ms up to
// 1s while connecting fails.
var reconnect = backoff.Policy{Min: 10 * time.Millisecond, Max: time.Second}

// Options configure a [Hub]. The zero value is ready to use.
type Options struct {
	// Linger is how long a channel stays subscribed after its last local
	// waiter left; a waiter arriving meanwhile needs no new SUBSCRIBE.
	// Zero means DefaultLinger (200ms); a negative value unsubscribes as
	// soon as the last waiter leaves.
	Linger time.Duration
	// Policy decides, for each message received, which waiters of its
	// channel are woken. It runs on the connection's reader goroutine and
	// must be quick and must not block. Nil wakes every waiter
	// ([WakeAll]) for every message; a value other than WakeOne, WakeAll,
	// Ignore and Mute is treated as Ignore. It must not panic.
	Policy func(channel, payload string) Wake
	// Sharded uses sharded pub/sub (SSUBSCRIBE, Redis 7): each channel is
	// subscribed on the node that serves its slot, over the client's own
	// connections, with one goroutine per subscribed channel. Off by
	// default: the one dedicated connection of classic pub/sub is cheaper,
	// and Redisson publishes with PUBLISH.
	Sharded bool
}

// Hub multiplexes the local waiters of many channels over one Redis
// subscription connection. Its methods are safe for concurrent use.
// A Hub must be closed with [Hub.Close] to stop its goroutine.
type Hub struct {
	rdb     rueidis.Client
	dial    func() (conn, error) // replaces connect in tests
	sharded bool
	linger  time.Duration
	policy  func(channel, payload string) Wake

	ctx    context.Context // ends at Close; bounds the hub's own I/O
	cancel context.CancelFunc
	kick   chan struct{} // tells the loop there is work (1-buffered)
	wg     sync.WaitGroup

	mu         sync.Mutex
	closed     bool
	started    bool
	chans      map[string]*topic
	pending    []*topic // channels waiting for SUBSCRIBE, in order
	idleHead   *topic   // lingering channels, oldest first
	idleTail   *topic
	subscribed int // channels subscribed on the server
	// missed are the listeners to call, outside mu, because their channel
	// was subscribed again after the connection was lost.
	missed []func()
}

// op is the command the loop currently has in flight for a channel.
type op uint8

const (
	opNone op = iota
	opSub
	opUnsub
)

// topic is the hub's state for one Redis channel. It exists while the
// channel has waiters, is queued, is in flight or is subscribed.
type topic struct {
	name       string
	head, tail *Waiter // waiters in arrival order
	n          int     // number of waiters
	attempt    *attempt

	idleAt             time.Duration // when the last waiter left, since epoch (valid if idle)
	idlePrev, idleNext *topic

	op       op
	onServer bool // subscribed on the current connection
	queued   bool // in Hub.pending
	solo     bool // a batch with it was refused: send it alone next time
	idle     bool // in the idle (linger) list
	resub    bool // wake every waiter once subscribed again
	muted    bool // the next message wakes nobody if it would wake one (Mute)
}

// epoch is what topic.idleAt counts from, on the monotonic clock: a
// duration is a third of a time.Time, and the hub keeps a topic per
// channel that has waiters.
var epoch = time.Now()

// attempt is one effort to subscribe a channel; the Subscribe calls that
// need the channel's subscription wait for it to be done.
type attempt struct {
	done  chan struct{}
	err   error
	tries int // SUBSCRIBE commands sent for it
}

func (a *attempt) finish(err error) {
	a.err = err
	close(a.done)
}

// Waiter is one local waiter on a channel, returned by [Hub.Subscribe].
// It receives wake-ups on [Waiter.C] until [Waiter.Leave]. A listener
// (returned by [Hub.Listen]) is a Waiter too, that takes no wake-ups: its
// function is called instead, for every message.
type Waiter struct {
	h          *Hub
	c          *topic
	prev, next *Waiter
	wake       chan struct{}
	listen     func() // set for a listener
	// more is set for a listener with functions other than listen (a
	// waiter, most often one, does without them).
	more *listenMore
	left bool
	// unconfirmed: a listener registered before its channel's
	// subscription was confirmed.
	unconfirmed bool
	// heard: a message woke the waiter since its last Heard.
	heard bool
	// err: the server refused the channel when the hub subscribed it
	// again after a lost connection (see Err).
	err error
}

// listenMore are a listener's functions other than listen.
type listenMore struct {
	// payload, when set, is called instead of listen with each
	// message's payload (see ListenPayload).
	payload func(string)
	// missed, when set, is called instead of listen when a message may
	// have been missed (see ListenMissed).
	missed func()
}

// New returns a hub that subscribes through rdb. It does no I/O: the
// subscription connection is made on the first [Hub.Subscribe]. The hub
// does not own rdb; close the hub before rdb.
func New(rdb rueidis.Client, opt Options) *Hub {
	linger := opt.Linger
	switch {
	case linger == 0:
		linger = DefaultLinger
	case linger < 0:
		linger = 0
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Hub{
		rdb:     rdb,
		sharded: opt.Sharded,
		linger:  linger,
		policy:  opt.Policy,
		ctx:     ctx,
		cancel:  cancel,
		kick:    make(chan struct{}, 1),
		chans:   make(map[string]*topic),
	}
}

// Subscribe registers a new waiter on channel. When the channel is not yet
// subscribed (nor lingering), Subscribe makes the hub send SUBSCRIBE and
// returns only after the server confirmed it, so that any PUBLISH on
// channel made after Subscribe returns reaches the waiter. Concurrent
// calls for one channel share one SUBSCRIBE; calls for different channels
// may share one command.
//
// It fails with [ErrClosed] once the hub is closed, with the Redis or
// connection error when the subscription could not be made, and with
// ctx's error when ctx ends first. On error no waiter is left registered.
func (h *Hub) Subscribe(ctx context.Context, channel string) (*Waiter, error) {
	return h.join(ctx, channel, nil, nil)
}

// ListenAndWait is Listen that waits, as Subscribe does, until the
// server confirmed the channel's subscription, so that no message
// published after it returns is missed; fn is then called only for
// messages and after a lost connection. On error no listener is left
// registered.
func (h *Hub) ListenAndWait(ctx context.Context, channel string, fn func()) (*Waiter, error) {
	return h.join(ctx, channel, fn, nil)
}

// join registers a waiter (listen nil) or a listener on channel and waits
// until the channel is subscribed; setup, when set, completes the waiter
// under the hub's lock.
func (h *Hub) join(ctx context.Context, channel string, listen func(), setup func(*Waiter)) (*Waiter, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("pubsub: subscribe %q: %w", channel, err)
	}
	w, p, err := h.begin(channel, listen, setup)
	if err != nil || p.a == nil {
		return w, err
	}
	select {
	case <-p.a.done:
		if err := p.Err(); err != nil {
			w.Leave(false)
			return nil, err
		}
		return w, nil
	case <-ctx.Done():
		w.Leave(false)
		return nil, fmt.Errorf("pubsub: subscribe %q: %w", channel, ctx.Err())
	}
}

// Pending is the subscription of a channel that [Hub.Begin] started: its
// outcome is known once Done is closed.
type Pending struct {
	channel string
	a       *attempt // nil: subscribed when Begin returned
}

// closedChan is the Done of a Pending whose channel was already
// subscribed.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// Done is closed when the server confirmed the subscription or it failed.
func (p Pending) Done() <-chan struct{} {
	if p.a == nil {
		return closedChan
	}
	return p.a.done
}

// Err is, once Done is closed, nil when the channel is subscribed, else
// what Subscribe would have failed with ([ErrClosed], or the Redis or
// connection error).
func (p Pending) Err() error {
	if p.a == nil || p.a.err == nil {
		return nil
	}
	if errors.Is(p.a.err, ErrClosed) {
		return ErrClosed
	}
	return fmt.Errorf("pubsub: subscribe %q: %w", p.channel, p.a.err)
}

// Begin is Subscribe that does not wait: it registers a waiter on channel
// at once and starts the channel's subscription, whose outcome the
// returned Pending tells. The waiter may be woken before then (by another
// waiter's [Waiter.PassOn]); no message published before Done is
// closed is seen. A caller that stops waiting for the subscription keeps
// the waiter registered, and the subscription goes on, until its
// [Waiter.Leave]; it must Leave when Err is not nil. Begin fails only
// with [ErrClosed].
func (h *Hub) Begin(channel string) (*Waiter, Pending, error) {
	return h.begin(channel, nil, nil)
}

// begin registers a waiter or a listener on channel and starts the
// channel's subscription unless it is made.
func (h *Hub) begin(channel string, listen func(), setup func(*Waiter)) (*Waiter, Pending, error) {
	h.mu.Lock()
	w := h.registerLocked(channel, listen)
	if w == nil {
		h.mu.Unlock()
		return nil, Pending{}, ErrClosed
	}
	if setup != nil {
		setup(w)
	}
	c := w.c
	if c.onServer && c.op == opNone {
		h.mu.Unlock()
		return w, Pending{}, nil
	}
	a := c.attempt
	if a == nil {
		a = &attempt{done: make(chan struct{})}
		c.attempt = a
		// A channel with a command in flight is looked at again by the
		// loop when the command is answered.
		if c.op == opNone && !c.queued {
			h.enqueue(c)
		}
	}
	h.mu.Unlock()
	return w, Pending{channel: channel, a: a}, nil
}

// Listen registers fn to be called for every message on channel, once
// when the channel's subscription is confirmed if it was not yet, and
// after the subscription connection was lost and made again (a message
// may have been missed), until the returned listener's Leave. It does not
// wait for the subscription. A listener takes no part in the wake-ups of
// the channel's waiters, but keeps the channel subscribed like one. fn
// runs on the connection's reader goroutine, outside the hub's lock; it
// must be quick and must not block.
//
// It fails with [ErrClosed] once the hub is closed.
func (h *Hub) Listen(channel string, fn func()) (*Waiter, error) {
	return h.ListenMissed(channel, fn, fn)
}

// ListenMissed is Listen with two functions: onMessage is called for
// every message on channel, onMissed when a message may have been missed
// (when the channel's subscription is confirmed, and after it was made
// again), for a listener that tells a message heard from one that may
// have been published unheard.
func (h *Hub) ListenMissed(channel string, onMessage, onMissed func()) (*Waiter, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.registerLocked(channel, onMessage)
	if w == nil {
		return nil, ErrClosed
	}
	w.more = &listenMore{missed: onMissed}
	c := w.c
	if !c.onServer || c.op != opNone {
		// Not subscribed yet: fn is called once the server confirms, for
		// what may have been published before.
		w.unconfirmed = true
	}
	if !c.onServer && c.op == opNone && !c.queued {
		// A command in flight brings the loop back to c by itself.
		h.enqueue(c)
	}
	return w, nil
}

// ListenPayload is ListenAndWait whose onMessage is given each message's
// payload, for a listener to which what was published matters (a
// keyspace notification's command name), and onMissed when a message may
// have been missed: after the subscription was made again (not when it is
// first confirmed: ListenPayload returns then). On error no listener is
// left registered.
func (h *Hub) ListenPayload(ctx context.Context, channel string, onMessage func(payload string), onMissed func()) (*Waiter, error) {
	return h.join(ctx, channel, func() {}, func(w *Waiter) { w.more = &listenMore{payload: onMessage, missed: onMissed} })
}

// registerLocked registers a waiter on channel (a listener when listen is
// set), starting the hub's goroutine on first use; nil once the hub is
// closed. The caller subscribes the channel if needed. h.mu is held.
func (h *Hub) registerLocked(channel string, listen func()) *Waiter {
	if h.closed {
		return nil
	}
	if !h.started {
		h.started = true
		h.wg.Add(1)
		go h.run()
	}
	c := h.chans[channel]
	if c == nil {
		c = &topic{name: channel}
		h.chans[channel] = c
	}
	w := &Waiter{h: h, c: c, listen: listen}
	if listen == nil {
		w.wake = make(chan struct{}, 1)
	}
	c.push(w)
	if c.idle {
		h.idleRemove(c)
	}
	return w
}

// WakeOne gives a wake-up to the longest-waiting local waiter of channel
// that has none pending, as a WakeOne message on it would, and reports
// whether channel has a waiter at all. It is for a message that arrives
// on another channel (a listener's), and may be called from a listener's
// function.
func (h *Hub) WakeOne(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[channel]
	if c == nil {
		return false
	}
	c.wakeOne(false)
	for w := c.head; w != nil; w = w.next {
		if w.listen == nil {
			return true
		}
	}
	return false
}

// C returns the channel on which the waiter receives wake-ups. It has
// room for one wake-up: wake-ups that arrive while one is pending merge
// into it.
func (w *Waiter) C() <-chan struct{} { return w.wake }

// Heard reports whether a message on the channel woke the waiter since
// the subscription was confirmed or since the last call of Heard, and
// clears it. Wake-ups of other origins (a lost connection made again, a
// wake-up passed on, Close) do not count: a waiter for which a message
// itself is the news (a count-down latch's opening) tells them apart.
func (w *Waiter) Heard() bool {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	heard := w.heard
	w.heard = false
	return heard
}

// Err is the server's refusal of the waiter's channel when the hub
// subscribed it again after the connection was lost (an ACL changed
// meanwhile, for example): the waiter hears nothing more on the channel.
// The hub wakes the waiter once when it is refused; Err is nil while the
// channel is subscribed or being subscribed. A waiter with an error
// leaves; a new Subscribe or Begin on the channel tries it again.
func (w *Waiter) Err() error {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	return w.err
}

// PassOn hands a wake-up the waiter took from C and could not use to the
// next waiter of the channel after it, in arrival order, that has none
// pending; the waiter stays registered. Each waiter that passes it on
// hands it further down the line, so a wake-up makes at most one pass
// over the channel's waiters and ends with the newest.
func (w *Waiter) PassOn() {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.left {
		return
	}
	for n := w.next; n != nil; n = n.next {
		if n.listen == nil && n.give(false) {
			return
		}
	}
}

// Leave unregisters the waiter; calling it again does nothing. If the
// waiter had a wake-up pending, or passOn is true (the caller took a
// wake-up from C but did not use it), one wake-up is handed to the next
// waiter of the channel, if there is one. When the channel has no waiter
// left, it is unsubscribed after the hub's linger unless a new waiter
// arrives first.
func (w *Waiter) Leave(passOn bool) {
	h := w.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if w.left {
		return
	}
	w.left = true
	c := w.c
	c.remove(w)
	if w.listen == nil {
		select {
		case <-w.wake:
			passOn = true
		default:
		}
		if passOn {
			c.wakeOne(false)
		}
	}
	h.settle(c)
}

// Has reports whether channel is subscribed on the server by the hub, or
// about to be (it has waiters or listeners, or lingers).
func (h *Hub) Has(channel string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[channel]
	return c != nil && (c.onServer || c.n > 0)
}

// Subscribed returns the number of channels currently subscribed on the
// server by the hub, lingering ones included.
func (h *Hub) Subscribed() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.subscribed
}

// Close closes the hub: Subscribe calls in progress and later fail with
// [ErrClosed], every waiter still registered gets a wake-up, the
// subscription connection is closed, and Close waits for the hub's
// goroutine to end. Waiters may still call Leave. Close is idempotent and
// always returns nil.
func (h *Hub) Close() error {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		for _, c := range h.chans {
			c.wakeAll(false)
			if c.attempt != nil {
				c.attempt.finish(ErrClosed)
				c.attempt = nil
			}
		}
	}
	h.mu.Unlock()
	h.cancel()
	h.wg.Wait()
	return nil
}

// onMessage is the connection's message hook. It runs on the reader
// goroutine and never blocks beyond the hub's short critical sections.
func (h *Hub) onMessage(m rueidis.PubSubMessage) {
	wake := WakeAll
	if h.policy != nil {
		wake = h.policy(m.Channel, m.Message)
	}
	h.mu.Lock()
	c := h.chans[m.Channel]
	var listeners []func()
	if c != nil {
		if c.muted {
			c.muted = false
			if wake == WakeOne {
				wake = Ignore
			}
		}
		switch wake {
		case WakeOne:
			c.wakeOne(true)
		case WakeAll:
			c.wakeAll(true)
		case Mute:
			c.muted = true
		}
		listeners = c.listeners(m.Message)
	}
	h.mu.Unlock()
	for _, fn := range listeners {
		fn()
	}
}

// missedListeners returns what c's listeners call when a message may
// have been missed. h.mu is held.
func (c *topic) missedListeners() []func() {
	var fns []func()
	for w := c.head; w != nil; w = w.next {
		if w.listen != nil {
			fns = append(fns, w.onMissed())
		}
	}
	return fns
}

// onMissed is what listener w calls when a message may have been missed.
func (w *Waiter) onMissed() func() {
	if w.more != nil && w.more.missed != nil {
		return w.more.missed
	}
	return w.listen
}

// listeners returns the functions of c's listeners for a message with
// payload. h.mu is held.
func (c *topic) listeners(payload string) []func() {
	var fns []func()
	for w := c.head; w != nil; w = w.next {
		switch {
		case w.more != nil && w.more.payload != nil:
			fn := w.more.payload
			fns = append(fns, func() { fn(payload) })
		case w.listen != nil:
			fns = append(fns, w.listen)
		}
	}
	return fns
}

// push appends w to the channel's waiters.
func (c *topic) push(w *Waiter) {
	w.prev = c.tail
	if c.tail != nil {
		c.tail.next = w
	} else {
		c.head = w
	}
	c.tail = w
	c.n++
}

// remove unlinks w from the channel's waiters.
func (c *topic) remove(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		c.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		c.tail = w.prev
	}
	w.prev, w.next = nil, nil
	c.n--
}

// wakeOne gives a wake-up to the oldest waiter that has none pending;
// heard says a message brings it (see Waiter.Heard).
func (c *topic) wakeOne(heard bool) {
	for w := c.head; w != nil; w = w.next {
		if w.listen == nil && w.give(heard) {
			return
		}
	}
}

// wakeAll gives a wake-up to every waiter that has none pending, and
// marks each as having heard a message when heard is set.
func (c *topic) wakeAll(heard bool) {
	for w := c.head; w != nil; w = w.next {
		if w.listen == nil {
			w.heard = w.heard || heard
			w.give(false)
		}
	}
}

// give puts a wake-up in w's channel unless one is pending, and reports
// whether it did; heard marks it as brought by a message. The hub's lock
// is held.
func (w *Waiter) give(heard bool) bool {
	select {
	case w.wake <- struct{}{}:
		w.heard = w.heard || heard
		return true
	default:
		return false
	}
}

// enqueue queues c for SUBSCRIBE and wakes the loop. h.mu is held.
func (h *Hub) enqueue(c *topic) {
	c.queued = true
	h.pending = append(h.pending, c)
	h.poke()
}

// poke wakes the loop without blocking.
func (h *Hub) poke() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// settle brings c in line with its waiters after a change: a subscribed
// channel without waiters starts to linger, a channel nobody needs any
// more is forgotten. h.mu is held.
func (h *Hub) settle(c *topic) {
	if c.n > 0 {
		if c.idle {
			h.idleRemove(c)
		}
		return
	}
	if c.op != opNone {
		return // the loop settles c when its command is answered
	}
	if c.attempt != nil {
		// Every Subscribe waiting for it has given up.
		c.attempt.finish(errNoWaiters)
		c.attempt = nil
	}
	if c.queued {
		return // the loop drops it from the queue
	}
	if c.onServer {
		if !c.idle {
			h.idlePush(c)
		}
		return
	}
	if h.chans[c.name] == c {
		delete(h.chans, c.name)
	}
}

// errNoWaiters finishes an attempt that nobody waits for any more.
var errNoWaiters = errors.New("pubsub: no waiters left")

// idlePush appends c to the linger list. h.mu is held.
func (h *Hub) idlePush(c *topic) {
	c.idle = true
	c.idleAt = time.Since(epoch)
	c.idlePrev, c.idleNext = h.idleTail, nil
	if h.idleTail != nil {
		h.idleTail.idleNext = c
	} else {
		h.idleHead = c
		h.poke() // the loop's timer must learn of the new first deadline
	}
	h.idleTail = c
}

// idleRemove takes c off the linger list. h.mu is held.
func (h *Hub) idleRemove(c *topic) {
	if !c.idle {
		return
	}
	if c.idlePrev != nil {
		c.idlePrev.idleNext = c.idleNext
	} else {
		h.idleHead = c.idleNext
	}
	if c.idleNext != nil {
		c.idleNext.idlePrev = c.idlePrev
	} else {
		h.idleTail = c.idlePrev
	}
	c.idlePrev, c.idleNext = nil, nil
	c.idle = false
}
