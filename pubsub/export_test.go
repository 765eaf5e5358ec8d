package pubsub

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// Registered returns how many waiters and channels the hub holds, for tests
// that check nothing is left behind.
func Registered(h *Hub) (waiters, channels int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range h.chans {
		waiters += c.n
	}
	return waiters, len(h.chans)
}

// State describes what the hub is doing with channel ch.
func State(h *Hub, ch string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.chans[ch]
	switch {
	case c == nil:
		return "none"
	case c.op == opSub:
		return "subscribing"
	case c.op == opUnsub:
		return "unsubscribing"
	case c.onServer:
		return "subscribed"
	case c.queued:
		return "queued"
	}
	return "unsubscribed"
}

// FakeServer stands for the server end of a hub's subscription
// connections, in memory, so that the hub's timing (linger, batching,
// reconnection backoff) can be tested on a fake clock. Every command the
// hub sends is logged with the fake time it arrived at.
type FakeServer struct {
	h *Hub

	mu      sync.Mutex
	log     []string
	dials   []time.Time
	cur     *fakeConn
	dialErr error            // dials fail with it while set
	refuse  map[string]error // SUBSCRIBE naming the channel fails with it
	hold    chan struct{}    // while set, SUBSCRIBE waits for it to close
}

// NewFake returns a hub whose connections are made to a FakeServer.
func NewFake(opt Options) (*Hub, *FakeServer) {
	h := New(nil, opt)
	f := &FakeServer{h: h, refuse: map[string]error{}}
	h.dial = f.dial
	return h, f
}

type fakeConn struct {
	f    *FakeServer
	errs chan error
	gone chan struct{} // closed by Break
	subs map[string]bool
	dead bool
}

var errFakeBroken = errors.New("fake: connection broken")

func (f *FakeServer) dial() (conn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dials = append(f.dials, time.Now())
	if f.dialErr != nil {
		return nil, f.dialErr
	}
	f.cur = &fakeConn{f: f, errs: make(chan error, 1), gone: make(chan struct{}), subs: map[string]bool{}}
	return f.cur, nil
}

func (c *fakeConn) subscribe(ctx context.Context, names []string) error {
	f := c.f
	f.mu.Lock()
	f.log = append(f.log, "SUBSCRIBE "+strings.Join(names, " "))
	hold := f.hold
	f.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-c.gone:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.dead {
		return errFakeBroken
	}
	for _, n := range names {
		if err := f.refuse[n]; err != nil {
			return err
		}
	}
	for _, n := range names {
		c.subs[n] = true
	}
	return nil
}

func (c *fakeConn) unsubscribe(_ context.Context, names []string) error {
	f := c.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, "UNSUBSCRIBE "+strings.Join(names, " "))
	if c.dead {
		return errFakeBroken
	}
	for _, n := range names {
		delete(c.subs, n)
	}
	return nil
}

func (c *fakeConn) broken() <-chan error { return c.errs }

func (c *fakeConn) close() {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.dead = true
	if c.f.cur == c {
		c.f.cur = nil
	}
}

// Log returns the commands received since the last call.
func (f *FakeServer) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.log
	f.log = nil
	return l
}

// Dials returns when each connection attempt was made.
func (f *FakeServer) Dials() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.dials...)
}

// FailDials makes connection attempts fail with err (nil: succeed).
func (f *FakeServer) FailDials(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dialErr = err
}

// Refuse makes every SUBSCRIBE naming channel fail with err.
func (f *FakeServer) Refuse(channel string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse[channel] = err
}

// Hold makes SUBSCRIBE commands wait until the returned function is
// called.
func (f *FakeServer) Hold() (release func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan struct{})
	f.hold = ch
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.hold == ch {
			f.hold = nil
		}
		close(ch)
	}
}

// Break breaks the current connection, as a killed client would.
func (f *FakeServer) Break() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cur != nil {
		f.cur.dead = true
		close(f.cur.gone)
		f.cur.errs <- errFakeBroken
		f.cur = nil
	}
}

// Publish delivers a message on channel if the current connection has it
// subscribed, and reports whether it did.
func (f *FakeServer) Publish(channel, payload string) bool {
	f.mu.Lock()
	ok := f.cur != nil && f.cur.subs[channel]
	f.mu.Unlock()
	if ok {
		f.h.onMessage(rueidis.PubSubMessage{Channel: channel, Message: payload})
	}
	return ok
}
