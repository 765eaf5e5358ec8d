package integration_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			require.NoError(t, l.Lock(a))
			got := make(chan error, 1)
			go func() { got <- l.Lock(b) }()
			// The scenario, not a wait: b waits across several renewal
			// intervals of a's hold.
			time.Sleep(2 * lease)
			require.NoError(t, l.Unlock(a))
			require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to get the lock after the Unlock"), "waiter's Lock")
			select {
			case <-l.Done(b):
				assert.Fail(t, "Done(b) is closed right after b acquired")
			default:
			}
			// The scenario, not a wait: two leases pass, in which a hold
			// that missed its renewals would expire.
			time.Sleep(2 * lease)
			held, err := l.IsHeldByOwner(b)
			require.NoError(t, err)
			assert.True(t, held, "IsHeldByOwner(b) after two leases: the hold renewed")
			mu.Lock()
			assert.Empty(t, lost, "calls of the lost handler")
			lost = nil
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
			assert.ErrorIs(t, err, rlock.ErrLockLost, "Do whose hold vanished while fn ran")
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
		time.Sleep(10 * lease / 3) // the scenario: the hold lasts about ten renewals
		return nil
	})
	require.NoError(t, err)
	m, err := srv.Do(t.Context(), "INFO", "commandstats")
	require.NoError(t, err)
	info, _ := m.ToString()
	loads := 0
	for line := range strings.SplitSeq(info, "\r\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_script|load:calls="); ok {
			loads, _ = strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
		}
	}
	assert.LessOrEqual(t, loads, 1, "SCRIPT LOADs sent for about ten renewals")
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
		require.NoError(t, err)
		old := l.Done(a)
		require.NoError(t, raw.Do(t.Context(), raw.B().Del().Key(l.Name()).Build()).Error())
		second, err := l.LockAndGetToken(a)
		if err == nil && second != first {
			select {
			case <-old:
			default:
				assert.Failf(t, "loss not reported", "re-entry got a new token (%d, the hold had %d), yet the old hold's loss was not reported", second, first)
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
		assert.ErrorIs(t, err, rlock.ErrLockLost, "Do")
	})
}
