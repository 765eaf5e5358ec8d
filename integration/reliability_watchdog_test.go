package integration_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReliabilityLongWaitKeepsRenewal: a waiter that waits longer than a
// renewal interval (a third of the watchdog timeout) and then acquires the
// lock must hold it like any holder: renewed, not reported lost (nor
// reported lost while it waited), its Done channel open.
func TestReliabilityLongWaitKeepsRenewal(t *testing.T) {
	const lease = 300 * time.Millisecond
	var (
		mu   sync.Mutex
		lost []string
	)
	c := relocktest.Client(t, rlock.WithWatchdogTimeout(lease), rlock.WithLostHandler(func(name, owner string, cause error) {
		mu.Lock()
		defer mu.Unlock()
		lost = append(lost, owner+": "+cause.Error())
	}))
	for _, k := range relKinds {
		t.Run(k.name, func(t *testing.T) {
			l := k.get(c, relocktest.Name(t))
			a := rlock.WithOwner(t.Context(), "a")
			b := rlock.WithOwner(t.Context(), "b")
			if err := l.Lock(a); err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() { got <- l.Lock(b) }()
			time.Sleep(2 * lease) // the scenario: a wait of several renewal intervals
			if err := l.Unlock(a); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter's Lock = %v", err)
			}
			select {
			case <-l.Done(b):
				t.Error("Done(b) is closed right after b acquired")
			default:
			}
			time.Sleep(2 * lease) // long enough for a missing renewal to let it expire
			if held, err := l.IsHeldByOwner(b); !held || err != nil {
				t.Errorf("after two leases, IsHeldByOwner(b) = %v, %v, want the hold renewed", held, err)
			}
			mu.Lock()
			if len(lost) > 0 {
				t.Errorf("lost handler called: %q", lost)
				lost = nil
			}
			mu.Unlock()
			_ = l.Unlock(b)
			_, _ = l.ForceUnlock(t.Context())
		})
	}
}

// TestReliabilityDoReportsLossFoundAtUnlock: when the hold is gone by the
// time Do's function returns (it expired or was deleted and no renewal
// has noticed yet), Do's own Unlock finds it gone; Do must report
// ErrLockLost, as its contract says for a hold lost while fn ran.
func TestReliabilityDoReportsLossFoundAtUnlock(t *testing.T) {
	c := relocktest.Client(t) // 30s watchdog: no renewal while fn runs
	raw := relocktest.Raw(t)
	for _, k := range relKinds {
		t.Run(k.name, func(t *testing.T) {
			l := k.get(c, relocktest.Name(t))
			err := l.Do(t.Context(), func(ctx context.Context) error {
				// The lease runs out (or an operator deletes the key).
				return raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error()
			})
			if !errors.Is(err, rlock.ErrLockLost) {
				t.Errorf("Do whose hold vanished while fn ran = %v, want ErrLockLost", err)
			}
		})
	}
}

// TestReliabilityRenewalIsOneRoundTrip: a batch of renewals is one round
// trip, not a SCRIPT LOAD before every batch (which rueidis' Lua.ExecMulti
// sends): when a renewal takes longer than the renewal interval the next
// one starts at once, so a renewal must take under half the lease, and two
// round trips would halve the reply delay a hold bears.
func TestReliabilityRenewalIsOneRoundTrip(t *testing.T) {
	srv := redistest.Start(t)
	const lease = 150 * time.Millisecond
	c := relocktest.ClientOn(t, srv, rlock.WithWatchdogTimeout(lease))
	l := c.GetLock("renewed")
	err := l.Do(t.Context(), func(ctx context.Context) error {
		time.Sleep(10 * lease / 3) // about ten renewals
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := srv.Do(t.Context(), "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	info, _ := m.ToString()
	loads := 0
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_script|load:calls="); ok {
			loads, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	if loads > 1 {
		t.Errorf("SCRIPT LOAD sent %d times for about ten renewals, want at most once", loads)
	}
}

// TestReliabilityReentryAfterLossReportsLoss: when a hold is gone from
// Redis (a restart without persistence, an expiry the watchdog has not
// noticed yet) and its owner re-enters, the acquire script finds no field
// and takes the lock anew, with a new token. The old hold was lost, and
// that must be reported: its Done channel closes and a Do around it sees
// ErrLockLost. (The no-persistence restart test's processes hit this.)
func TestReliabilityReentryAfterLossReportsLoss(t *testing.T) {
	c := relocktest.Client(t) // 30s watchdog: no renewal notices the loss
	raw := relocktest.Raw(t)
	l := c.GetFencedLock(relocktest.Name(t))
	a := rlock.WithOwner(t.Context(), "a")
	t.Run("Lock", func(t *testing.T) {
		first, err := l.LockAndGetToken(a)
		if err != nil {
			t.Fatal(err)
		}
		old := l.Done(a)
		if err := raw.Do(t.Context(), raw.B().Del().Key(l.Name()).Build()).Error(); err != nil {
			t.Fatal(err)
		}
		second, err := l.LockAndGetToken(a)
		if err == nil && second != first {
			select {
			case <-old:
			default:
				t.Errorf("re-entry got a new token (%d, the hold had %d), yet the old hold's loss was not reported", second, first)
			}
		}
		n, _ := l.HoldCount(a)
		t.Logf("second LockAndGetToken = %d, %v; HoldCount %d", second, err, n)
		for range 2 {
			_ = l.Unlock(a)
		}
	})
	t.Run("Do", func(t *testing.T) {
		err := l.Do(a, func(ctx context.Context) error {
			if err := raw.Do(ctx, raw.B().Del().Key(l.Name()).Build()).Error(); err != nil {
				return err
			}
			if _, err := l.LockAndGetToken(ctx); err != nil {
				return err
			}
			defer l.Unlock(ctx)
			select {
			case <-ctx.Done():
				return context.Cause(ctx)
			case <-time.After(time.Second):
				return errors.New("Do's context still live a second after its hold was lost and taken anew")
			}
		})
		if !errors.Is(err, rlock.ErrLockLost) {
			t.Errorf("Do = %v, want ErrLockLost", err)
		}
	})
}
