package main

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
)

// The minimal lock is the yardstick beside relock: Redisson's lock
// algorithm and nothing more, on rueidis. The lock is a hash whose field
// <clientID>:<n> holds a hold count, under a lease. A caller that finds it
// held subscribes to the lock's channel (once per name per client, on the
// client's one pub/sub connection, and stays subscribed until the client
// closes), tries again, then sleeps until an unlock message or the end of
// the holder's lease, and tries again. There is no unlock latch, no
// watchdog (the lease is fixed), no record of holds in the process and no
// unsubscribing: what relock costs beyond this is what its extras cost.

// minimalLease is the fixed lease of every hold: Redisson's default.
const minimalLease = 30 * time.Second

// minimalAcquire takes the lock, or adds a level to the caller's hold.
var minimalAcquire = rueidis.NewLuaScript(`
-- KEYS[1] the lock's hash; ARGV[1] lease in ms; ARGV[2] the caller's field.
-- Returns nil when the caller holds the lock after the call, else the
-- lease left to the holder in ms.
if redis.call('exists', KEYS[1]) == 0 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
`)

// minimalRelease gives back one level of the caller's hold; the last one
// deletes the hash and tells the waiters.
var minimalRelease = rueidis.NewLuaScript(`
-- KEYS[1] the lock's hash; KEYS[2] its unlock channel; ARGV[1] lease in ms;
-- ARGV[2] the caller's field. Returns nil when the caller holds nothing,
-- else the levels left (0: the hash is gone and "0" was published).
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local left = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if left > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  return left
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], '0')
return 0
`)

var errMinimalNotHeld = errors.New("minimal: unlock of a lock not held")

// minimalImpl is one client: a pipelined connection for the scripts and
// a dedicated one for pub/sub, as a Redisson client or relock's has.
type minimalImpl struct {
	rdb     rueidis.Client
	sub     rueidis.DedicatedClient
	release func() // gives the pub/sub connection back
	id      string
	seq     atomic.Int64
	subMu   sync.Mutex // one SUBSCRIBE at a time on sub
	chans   sync.Map   // channel -> *minimalChan
}

func openMinimal(addr string, w *wire) (impl, error) {
	opt := w.rueidisOption(addr)
	opt.PipelineMultiplex = -1 // one connection, as relock's NewClient
	rdb, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, err
	}
	m := &minimalImpl{rdb: rdb, id: rand.Text()}
	m.sub, m.release = rdb.Dedicate()
	m.sub.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: m.onMessage})
	return m, nil
}

func (m *minimalImpl) close() {
	m.release()
	m.rdb.Close()
}

// locker returns a handle for one goroutine: its field plays the part of
// Redisson's thread ID.
func (m *minimalImpl) locker(name string) locker {
	field := m.id + ":" + strconv.FormatInt(m.seq.Add(1), 10)
	return &minimalLock{
		m:    m,
		keys: []string{name, "redisson_lock__channel:{" + name + "}"},
		args: []string{strconv.FormatInt(minimalLease.Milliseconds(), 10), field},
	}
}

// onMessage runs on the pub/sub connection's reader: it must not block.
func (m *minimalImpl) onMessage(msg rueidis.PubSubMessage) {
	if v, ok := m.chans.Load(msg.Channel); ok {
		v.(*minimalChan).notify()
	}
}

// subscribe returns the wake-ups of channel, subscribing first if this
// client has not yet. It returns once the server confirmed the
// subscription, so no message published after that is missed.
func (m *minimalImpl) subscribe(ctx context.Context, channel string) (*minimalChan, error) {
	v, loaded := m.chans.LoadOrStore(channel, &minimalChan{ready: make(chan struct{})})
	c := v.(*minimalChan)
	if loaded {
		select {
		case <-c.ready:
			return c, c.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.subMu.Lock()
	err := m.sub.Do(ctx, m.sub.B().Subscribe().Channel(channel).Build()).Error()
	m.subMu.Unlock()
	if err != nil {
		c.err = err
		m.chans.Delete(channel) // the next caller tries again
	}
	close(c.ready)
	return c, err
}

// minimalChan is one subscribed channel: it counts unlock messages and
// wakes one sleeping waiter per message, as Redisson's semaphore does.
type minimalChan struct {
	ready chan struct{} // closed once subscribed (or failed: err)
	err   error

	mu     sync.Mutex
	msgs   uint64          // unlock messages so far
	asleep []chan struct{} // sleeping waiters, longest asleep first
}

func (c *minimalChan) notify() {
	c.mu.Lock()
	c.msgs++
	c.wakeOne()
	c.mu.Unlock()
}

// wakeOne wakes the waiter asleep longest, if any; c.mu is held.
func (c *minimalChan) wakeOne() {
	if len(c.asleep) > 0 {
		c.asleep[0] <- struct{}{}
		c.asleep = c.asleep[1:]
	}
}

// seen is the number of messages so far: a waiter reads it before an
// attempt, and sleeps only if no message came since.
func (c *minimalChan) seen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.msgs
}

// sleep waits until a message after seen, the holder's lease left (ttlMs;
// -1: the key has no expiry, -2: it is already gone) or ctx's end.
func (c *minimalChan) sleep(ctx context.Context, seen uint64, ttlMs int64) error {
	if ttlMs == -2 || ttlMs == 0 {
		return nil
	}
	c.mu.Lock()
	if c.msgs != seen {
		c.mu.Unlock()
		return nil
	}
	wake := make(chan struct{}, 1)
	c.asleep = append(c.asleep, wake)
	c.mu.Unlock()
	var expired <-chan time.Time
	if ttlMs > 0 {
		t := time.NewTimer(time.Duration(ttlMs) * time.Millisecond)
		defer t.Stop()
		expired = t.C
	}
	select {
	case <-wake:
		return nil
	case <-expired:
		c.leave(wake, false)
		return nil
	case <-ctx.Done():
		c.leave(wake, true)
		return ctx.Err()
	}
}

// leave takes a waiter that stopped sleeping off the list. A waiter that
// gives up passes on a wake-up it got meanwhile.
func (c *minimalChan) leave(wake chan struct{}, givingUp bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := slices.Index(c.asleep, wake); i >= 0 {
		c.asleep = slices.Delete(c.asleep, i, i+1)
		return
	}
	if givingUp {
		c.wakeOne()
	}
}

// minimalLock is one goroutine's handle on a lock name.
type minimalLock struct {
	m    *minimalImpl
	keys []string // the hash and its channel
	args []string // lease in ms, the field
}

// try runs the acquire script once: true when it holds the lock, else the
// holder's lease left in ms. The script runs to its end even if ctx ends
// meanwhile, so that no lock it took is left behind unknown until its
// lease runs out; one taken after ctx ended is given back.
func (l *minimalLock) try(ctx context.Context) (bool, int64, error) {
	ttl, err := minimalAcquire.Exec(context.WithoutCancel(ctx), l.m.rdb, l.keys[:1], l.args).AsInt64()
	if rueidis.IsRedisNil(err) {
		if ctx.Err() != nil {
			_ = l.Unlock(context.WithoutCancel(ctx))
			return false, 0, ctx.Err()
		}
		return true, 0, nil
	}
	return false, ttl, err
}

func (l *minimalLock) Lock(ctx context.Context) error {
	ok, _, err := l.try(ctx)
	if err != nil || ok {
		return err
	}
	c, err := l.m.subscribe(ctx, l.keys[1])
	if err != nil {
		return err
	}
	for {
		seen := c.seen()
		ok, ttl, err := l.try(ctx)
		if err != nil || ok {
			return err
		}
		if err := c.sleep(ctx, seen, ttl); err != nil {
			return err
		}
	}
}

func (l *minimalLock) Unlock(ctx context.Context) error {
	_, err := minimalRelease.Exec(ctx, l.m.rdb, l.keys, l.args).AsInt64()
	if rueidis.IsRedisNil(err) {
		return errMinimalNotHeld
	}
	return err
}
