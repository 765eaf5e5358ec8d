package pubsub

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/backoff"
)

// conn is the hub's subscription connection: the one dedicated connection
// of classic pub/sub, or, in sharded mode, the set of SSUBSCRIBE receivers.
type conn interface {
	// subscribe subscribes names and returns once the server confirmed.
	subscribe(ctx context.Context, names []string) error
	// unsubscribe unsubscribes names.
	unsubscribe(ctx context.Context, names []string) error
	// broken yields (at most once) why the connection stopped working.
	broken() <-chan error
	close()
}

var errConnClosed = errors.New("pubsub: subscription connection closed")

// dedicated is classic pub/sub over one dedicated connection.
type dedicated struct {
	dc   rueidis.DedicatedClient
	errs <-chan error
}

// connect opens the hub's connection. A dedicated connection that could
// not be dialed fails here: rueidis reports its error on the hooks'
// channel at once.
func (h *Hub) connect() (conn, error) {
	if h.dial != nil {
		return h.dial()
	}
	if h.sharded {
		return newShardedConn(h), nil
	}
	dc, _ := h.rdb.Dedicate()
	errs := dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: h.onMessage})
	select {
	case err := <-errs:
		dc.Close()
		if err == nil {
			err = errConnClosed
		}
		return nil, err
	default:
	}
	return &dedicated{dc: dc, errs: errs}, nil
}

func (d *dedicated) subscribe(ctx context.Context, names []string) error {
	return d.dc.Do(ctx, d.dc.B().Subscribe().Channel(names...).Build()).Error()
}

func (d *dedicated) unsubscribe(ctx context.Context, names []string) error {
	return d.dc.Do(ctx, d.dc.B().Unsubscribe().Channel(names...).Build()).Error()
}

func (d *dedicated) broken() <-chan error { return d.errs }

func (d *dedicated) close() { d.dc.Close() }

// run is the hub's only goroutine. It owns the connection and sends every
// SUBSCRIBE and UNSUBSCRIBE, one command at a time, so the state of the
// server's subscriptions changes in one place only.
func (h *Hub) run() {
	defer h.wg.Done()
	var (
		cn       conn
		failures int // connection failures since the last good SUBSCRIBE
		timer    = time.NewTimer(time.Hour)
	)
	timer.Stop()
	defer timer.Stop()
	defer func() {
		if cn != nil {
			cn.close()
		}
	}()

	for h.ctx.Err() == nil {
		if cn == nil && h.wantConn() {
			if failures > 0 && !backoff.Sleep(h.ctx.Done(), reconnect.Delay(failures)) {
				return
			}
			c, err := h.connect()
			if err != nil {
				failures++
				h.failPending(err)
				continue
			}
			cn = c
		}
		if cn != nil {
			worked, err := h.step(cn)
			if err != nil {
				if h.ctx.Err() != nil {
					return
				}
				cn.close()
				cn = nil
				failures++
				h.dropped()
				continue
			}
			if worked {
				failures = 0
				continue
			}
		}

		// Nothing to do until a Subscribe or Leave, the next linger
		// deadline, or the connection's end.
		var errs <-chan error
		if cn != nil {
			errs = cn.broken()
		}
		if d, ok := h.nextDeadline(); ok {
			timer.Reset(time.Until(d))
		}
		select {
		case <-h.ctx.Done():
		case <-h.kick:
		case <-timer.C:
		case <-errs:
			cn.close()
			cn = nil
			h.dropped()
		}
		timer.Stop()
	}
}

// wantConn drops queued channels nobody waits for and reports whether any
// channel still needs a subscription.
func (h *Hub) wantConn() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.pending[:0]
	for _, c := range h.pending {
		if c.n == 0 {
			c.queued = false
			h.settle(c)
			continue
		}
		kept = append(kept, c)
	}
	clear(h.pending[len(kept):])
	h.pending = kept
	if len(kept) == 0 {
		h.pending = nil
	}
	return len(kept) > 0
}

// failPending fails the Subscribe calls waiting for queued channels: no
// connection could be made. The channels stay queued for the waiters that
// are already registered.
func (h *Hub) failPending(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.pending {
		if c.attempt != nil {
			c.attempt.finish(err)
			c.attempt = nil
		}
	}
}

// nextDeadline returns when the oldest lingering channel is due.
func (h *Hub) nextDeadline() (time.Time, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.idleHead == nil {
		return time.Time{}, false
	}
	return epoch.Add(h.idleHead.idleAt + h.linger), true
}

// step sends one batch of SUBSCRIBE and one of UNSUBSCRIBE, if there is
// work for them. It reports whether it sent anything, and returns an error
// when the connection is no longer usable.
func (h *Hub) step(cn conn) (worked bool, err error) {
	if subs := h.takePending(); len(subs) > 0 {
		worked = true
		names := make([]string, len(subs))
		for i, c := range subs {
			names[i] = c.name
		}
		err = cn.subscribe(h.ctx, names)
		if fatal := h.subscribeDone(subs, err); fatal {
			return worked, err
		}
	}
	if unsubs := h.takeExpired(time.Now()); len(unsubs) > 0 {
		worked = true
		names := make([]string, len(unsubs))
		for i, c := range unsubs {
			names[i] = c.name
		}
		err = cn.unsubscribe(h.ctx, names)
		if fatal := h.unsubscribeDone(unsubs, err); fatal {
			return worked, err
		}
	}
	return worked, nil
}

// takePending takes up to maxBatch queued channels that still have
// waiters and marks them in flight.
func (h *Hub) takePending() []*topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*topic
	i := 0
	for ; i < len(h.pending) && len(out) < maxBatch; i++ {
		c := h.pending[i]
		if c.solo && len(out) > 0 {
			break // it goes alone in the next batch
		}
		h.pending[i] = nil
		c.queued = false
		if c.n == 0 {
			c.solo = false
			h.settle(c)
			continue
		}
		c.op = opSub
		if c.attempt != nil {
			c.attempt.tries++
		}
		out = append(out, c)
		if c.solo {
			i++
			break
		}
	}
	h.pending = h.pending[i:]
	if len(h.pending) == 0 {
		h.pending = nil
	}
	return out
}

// takeExpired takes up to maxBatch lingering channels whose linger has
// passed and marks them in flight.
func (h *Hub) takeExpired(now time.Time) []*topic {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*topic
	for c := h.idleHead; c != nil && len(out) < maxBatch; c = h.idleHead {
		if now.Sub(epoch) < c.idleAt+h.linger {
			break
		}
		h.idleRemove(c)
		c.op = opUnsub
		out = append(out, c)
	}
	return out
}

// subscribeDone records the answer to a SUBSCRIBE. It reports whether err
// means the connection is broken.
func (h *Hub) subscribeDone(subs []*topic, err error) (fatal bool) {
	_, redisErr := rueidis.IsRedisErr(err)
	fatal = err != nil && !redisErr
	h.mu.Lock()
	defer func() {
		missed := h.missed
		h.missed = nil
		h.mu.Unlock()
		for _, fn := range missed {
			fn()
		}
	}()
	for _, c := range subs {
		c.op = opNone
		switch {
		case err == nil:
			c.solo = false
			c.onServer = true
			h.subscribed++
			if c.attempt != nil {
				c.attempt.finish(nil)
				c.attempt = nil
			}
			if c.resub {
				// A message may have been lost while the channel was
				// not subscribed.
				c.resub = false
				c.wakeAll(false)
				h.missed = append(h.missed, c.missedListeners()...)
			} else {
				// Listeners that came before the subscription may have
				// missed a message too.
				for w := c.head; w != nil; w = w.next {
					if w.unconfirmed {
						h.missed = append(h.missed, w.onMissed())
					}
				}
			}
			for w := c.head; w != nil; w = w.next {
				w.unconfirmed = false
			}
		case redisErr && len(subs) > 1:
			// The server refused the batch (an ACL on one channel, for
			// example): try each channel alone to find which.
			c.solo = true
			h.enqueue(c)
		case redisErr:
			// The server refused the channel: retrying will not help, so
			// the callers get the error.
			c.solo = false
			if c.attempt != nil {
				c.attempt.finish(err)
				c.attempt = nil
			}
			if c.resub {
				// Subscribed again after a lost connection, the channel
				// was refused: its waiters would sleep on a channel
				// that is not subscribed. Each learns so (Err) when
				// woken.
				c.resub = false
				for w := c.head; w != nil; w = w.next {
					if w.listen == nil {
						w.err = err
					}
				}
				c.wakeAll(false)
			}
		default:
			// The connection broke; dropped queues c again. A Subscribe
			// call is retried once on a new connection, then it fails.
			if c.attempt != nil && c.attempt.tries >= 2 {
				c.attempt.finish(err)
				c.attempt = nil
			}
		}
		if !fatal {
			h.settle(c)
		}
	}
	return fatal
}

// unsubscribeDone records the answer to an UNSUBSCRIBE. It reports whether
// err means the connection is broken.
func (h *Hub) unsubscribeDone(unsubs []*topic, err error) (fatal bool) {
	_, redisErr := rueidis.IsRedisErr(err)
	fatal = err != nil && !redisErr
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range unsubs {
		c.op = opNone
		if fatal {
			continue // dropped settles every channel
		}
		if err == nil {
			c.onServer = false
			c.muted = false
			h.subscribed--
			if c.n > 0 || c.attempt != nil {
				// Waiters arrived while UNSUBSCRIBE was in flight.
				h.enqueue(c)
			}
		}
		h.settle(c) // after a refusal, c lingers again and is retried
	}
	return fatal
}

// dropped handles the loss of the connection: nothing is subscribed any
// more, every waiter is woken (a message may have been lost), lingering
// channels are forgotten and channels with waiters are queued to be
// subscribed again, after which their waiters are woken once more.
func (h *Hub) dropped() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subscribed = 0
	for _, c := range h.chans {
		c.onServer = false
		c.muted = false // the message it was for may be lost
		if c.idle {
			h.idleRemove(c)
		}
		if c.n > 0 {
			c.resub = true
			c.wakeAll(false)
		}
		if (c.n > 0 || c.attempt != nil) && !c.queued {
			h.enqueue(c)
		}
		h.settle(c)
	}
}
