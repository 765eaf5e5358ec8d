package redissontest

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/redis/rueidis"
)

// entryKind says what a channel's messages do to its entry: Redisson's
// LockPubSub, SemaphorePubSub or CountDownLatchPubSub.
type entryKind int

const (
	lockEntry entryKind = iota
	semaphoreEntry
	latchEntry
)

// entry is the Client's state for one subscribed channel, shared by its
// local waiters (RedissonLockEntry, RedissonCountDownLatchEntry).
type entry struct {
	kind    entryKind
	channel string
	// acquired counts the local subscriptions (the entry's counter).
	acquired int
	sem      semaphore // lock and semaphore entries
	gate     *gate     // latch entries
}

// onMessage is what Redisson's PubSub classes do with a message.
func (e *entry) onMessage(n int64, subscribers int) {
	switch e.kind {
	case lockEntry:
		// LockPubSub: UNLOCK_MESSAGE (0) lets one waiter go,
		// READ_UNLOCK_MESSAGE (1) every waiter queued now.
		switch n {
		case 0:
			e.sem.release(1)
		case 1:
			e.sem.release(e.sem.queueLength())
		}
	case semaphoreEntry:
		// SemaphorePubSub: as many as were released, at most as many as
		// subscribe.
		e.sem.release(int(min(n, int64(subscribers))))
	case latchEntry:
		// CountDownLatchPubSub: ZERO_COUNT_MESSAGE (0) opens,
		// NEW_COUNT_MESSAGE (1) closes.
		switch n {
		case 0:
			e.gate.open()
		case 1:
			e.gate.close()
		}
	}
}

// Sleeping is how many of c's waiters sleep on channel: lock and
// semaphore waiters queued on its entry for a message or their timeout,
// latch waiters on its closed gate.
func (c *Client) Sleeping(channel string) int {
	c.ps.mu.Lock()
	e := c.ps.entries[channel]
	c.ps.mu.Unlock()
	switch {
	case e == nil:
		return 0
	case e.kind == latchEntry:
		return e.gate.sleepers()
	}
	return e.sem.queueLength()
}

// pubsub is the Client's subscription service: one dedicated connection,
// one server subscription per channel however many local waiters use it.
type pubsub struct {
	c *Client

	// opMu orders subscribes and unsubscribes (Redisson orders them per
	// channel with an AsyncSemaphore); it is held across the round trip.
	opMu sync.Mutex
	dc   rueidis.DedicatedClient

	// mu guards entries, which the message hook reads.
	mu      sync.Mutex
	entries map[string]*entry
	closed  bool
}

var errClosed = errors.New("redissontest: client closed")

// subscribe returns the entry of channel, subscribing it on the server
// (and waiting for the server's confirmation) when it is new.
func (p *pubsub) subscribe(ctx context.Context, kind entryKind, channel string) (*entry, error) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errClosed
	}
	if e := p.entries[channel]; e != nil {
		e.acquired++
		p.mu.Unlock()
		return e, nil
	}
	e := &entry{kind: kind, channel: channel, acquired: 1}
	if kind == latchEntry {
		e.gate = newGate()
	}
	p.entries[channel] = e
	p.mu.Unlock()
	if p.dc == nil {
		dc, _ := p.c.rdb.Dedicate()
		dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: p.onMessage})
		p.dc = dc
	}
	if err := p.dc.Do(ctx, p.dc.B().Subscribe().Channel(channel).Build()).Error(); err != nil {
		p.mu.Lock()
		delete(p.entries, channel)
		p.mu.Unlock()
		return nil, err
	}
	return e, nil
}

// unsubscribe drops one local subscription of e; the last one
// unsubscribes the channel on the server.
func (p *pubsub) unsubscribe(e *entry) {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	e.acquired--
	last := e.acquired == 0 && p.entries[e.channel] == e
	if last {
		delete(p.entries, e.channel)
	}
	closed := p.closed
	p.mu.Unlock()
	if last && !closed && p.dc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), unsubscribeTimeout)
		defer cancel()
		_ = p.dc.Do(ctx, p.dc.B().Unsubscribe().Channel(e.channel).Build()).Error()
	}
}

// onMessage decodes a message as Redisson's LongCodec does and hands it to
// the channel's entry.
func (p *pubsub) onMessage(m rueidis.PubSubMessage) {
	n, err := strconv.ParseInt(m.Message, 10, 64)
	if err != nil {
		p.c.undecoded.Add(1)
		return
	}
	p.mu.Lock()
	e := p.entries[m.Channel]
	subscribers := 0
	if e != nil {
		subscribers = e.acquired
	}
	p.mu.Unlock()
	if e != nil {
		e.onMessage(n, subscribers)
	}
}

func (p *pubsub) close() {
	p.opMu.Lock()
	defer p.opMu.Unlock()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	if p.dc != nil {
		p.dc.Close()
		p.dc = nil
	}
}
