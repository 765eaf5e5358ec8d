package lockcore

import (
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/observe"
)

// These tests drive the wait loop through a subscription that is begun
// and not yet confirmed (Core.beginSubscribe's pending), with a scripted
// Waiter whose attempts say what each one finds, and a stand-in hub
// waiter that records what the loop does with it.

// pendWaiter is a hub waiter whose calls are recorded.
type pendWaiter struct {
	mu      sync.Mutex
	wake    chan struct{}
	leaves  []bool // the passOn of each Leave
	passOns int
}

func newPendWaiter() *pendWaiter { return &pendWaiter{wake: make(chan struct{}, 1)} }

func (w *pendWaiter) C() <-chan struct{} { return w.wake }
func (w *pendWaiter) Heard() bool        { return false }
func (*pendWaiter) Err() error           { return nil }

func (w *pendWaiter) PassOn() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.passOns++
}

func (w *pendWaiter) Leave(passOn bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.leaves = append(w.leaves, passOn)
}

func (w *pendWaiter) calls() (leaves []bool, passOns int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]bool(nil), w.leaves...), w.passOns
}

// pendSub is a pending subscription that a test ends.
type pendSub struct {
	done chan struct{}
	err  error
}

func newPendSub() *pendSub { return &pendSub{done: make(chan struct{})} }

func (p *pendSub) Done() <-chan struct{} { return p.done }
func (p *pendSub) Err() error            { return p.err }

// fail ends the subscription with err.
func (p *pendSub) fail(err error) {
	p.err = err
	close(p.done)
}

// scripted is a Waiter whose attempts are the functions in steps, in
// order (the last one repeats).
type scripted struct {
	steps []func() (Outcome, error)
	n     int
}

func (s *scripted) Attempt(w *Wait) (Outcome, error) {
	if err := w.Over(); err != nil {
		return Outcome{}, err
	}
	f := s.steps[min(s.n, len(s.steps)-1)]
	s.n++
	return f()
}

func (*scripted) WaitChannel() string { return "ch:s" }
func (*scripted) End(*Wait, bool)     {}

// waitNoPanic runs c.Wait(w, k) and fails t (instead of crashing the
// test binary) when it panics.
func waitNoPanic(t *testing.T, c *Core, w *Wait, k Waiter) (done bool, err error) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("Wait panicked: %v", p)
		}
	}()
	return c.Wait(w, k)
}

// errDropped is a lost connection (a transient failure).
var errDropped = errors.New("connection reset by peer")

// TestModelWakeUpKeptWhenPendingSubscriptionFails: a waiter whose
// subscription is still pending takes a wake-up (passed on by another
// waiter, or the hub's after a lost connection), its attempt fails on the
// lost connection, and then its subscription fails too: the waiter leaves
// the channel. The wake-up it took and has not used is handed on as it
// leaves (no other local waiter may sleep through it), and its next
// attempt, which finds the permit free for another waiter (PassOn), does
// not pass on through the waiter it left (that panicked: nil waiter).
func TestModelWakeUpKeptWhenPendingSubscriptionFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		first, pend := newPendWaiter(), newPendSub()
		second := newPendWaiter()
		begins := 0
		c.beginHook = func(string) (waiter, pending, error) {
			begins++
			if begins == 1 {
				// A wake-up reaches the waiter before its
				// subscription is confirmed.
				first.wake <- struct{}{}
				return first, pend, nil
			}
			return second, nil, nil
		}
		k := &scripted{steps: []func() (Outcome, error){
			// Refused: look again in 10ms (the subscription is not
			// made by then).
			func() (Outcome, error) { return Outcome{Retry: 10 * time.Millisecond}, nil },
			// Woken: the connection is lost, and the subscription
			// fails with it.
			func() (Outcome, error) {
				pend.fail(errDropped)
				return Outcome{}, errDropped
			},
			// Refused, the permit left for another local waiter.
			func() (Outcome, error) { return Outcome{Retry: time.Hour, PassOn: true}, nil },
			func() (Outcome, error) { return Outcome{Done: true}, nil },
		}}
		done, err := waitNoPanic(t, c, &Wait{Ctx: t.Context(), Limit: NoLimit, Lock: observe.Lock{Kind: "s", Name: "s"}}, k)
		if err != nil || !done {
			t.Fatalf("Wait = %v, %v; want true, nil", done, err)
		}
		if leaves, _ := first.calls(); len(leaves) != 1 || !leaves[0] {
			t.Errorf("the waiter whose subscription failed left with passOn %v, want [true]: the wake-up it took is lost", leaves)
		}
		if begins != 2 {
			t.Errorf("%d subscriptions begun, want 2 (the failed one, then again)", begins)
		}
	})
}

// TestModelPendingSubscriptionRefusedEndsWait: a subscription the server
// refuses (an error reply: an ACL that denies the channel) after the
// call's bound, while the call sleeps, ends the call with the refusal, as
// a refusal within the bound does: it is not retried as a lost connection
// (a refusal slower than each bound would be retried for good, the call
// logging an outage).
func TestModelPendingSubscriptionRefusedEndsWait(t *testing.T) {
	// A real error reply of the server.
	rdb := redistest.Shared(t).Client(t)
	refusal := rdb.Do(t.Context(), rdb.B().Arbitrary("RELOCK-NO-SUCH-COMMAND").Build()).Error()
	if !IsReply(refusal) {
		t.Fatalf("%v is not an error reply", refusal)
	}
	synctest.Test(t, func(t *testing.T) {
		m := newModel()
		c := modelCore(t, m, 30*time.Second)
		first, pend := newPendWaiter(), newPendSub()
		begins := 0
		c.beginHook = func(string) (waiter, pending, error) {
			begins++
			if begins == 1 {
				return first, pend, nil
			}
			return newPendWaiter(), nil, nil
		}
		k := &scripted{steps: []func() (Outcome, error){
			// Refused: look again in 10ms (the subscription is not
			// made by then).
			func() (Outcome, error) { return Outcome{Retry: 10 * time.Millisecond}, nil },
			// Refused again; the server refuses the subscription
			// while the call sleeps.
			func() (Outcome, error) {
				pend.fail(refusal)
				return Outcome{Retry: time.Hour}, nil
			},
			func() (Outcome, error) { return Outcome{Done: true}, nil },
		}}
		done, err := waitNoPanic(t, c, &Wait{Ctx: t.Context(), Limit: NoLimit, Lock: observe.Lock{Kind: "s", Name: "s"}}, k)
		if done || !IsReply(err) {
			t.Errorf("Wait = %v, %v; want false and the refusal", done, err)
		}
		if begins != 1 {
			t.Errorf("%d subscriptions begun, want 1: a refused one is not begun again", begins)
		}
		if leaves, _ := first.calls(); len(leaves) != 1 {
			t.Errorf("the refused waiter left %d times, want once", len(leaves))
		}
	})
}
