package rlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestReview35CloseWhileGrantInFlight: the release that grants the lock
// to b has run in Redis, and its reply is held back while the Client is
// closed. Close returns; b's call ends with an error (the Client closed)
// or nil; with an error, the lock must be free within the confirmation
// window (3s) of the grant, not the watchdog's 30s.
func TestReview35CloseWhileGrantInFlight(t *testing.T) {
	for round := range 2 {
		f := relocktest.NewFaulty(relocktest.Raw(t))
		c, err := rlock.New(f)
		require.NoError(t, err)
		raw := relocktest.Raw(t)
		name := relocktest.Name(t)
		l := c.GetLock(name)
		a := rlock.WithOwner(t.Context(), "a")
		b := rlock.WithOwner(t.Context(), "b")
		require.NoError(t, l.Lock(a))
		res := make(chan error, 1)
		go func() { res <- l.Lock(b) }()
		time.Sleep(time.Duration(20*(round+1)) * time.Millisecond) // b asleep, offered (checked below by GrantsMade)
		closed := make(chan error, 1)
		var once sync.Once
		f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockUnlock.SHA1}, N: 1, Run: true, Keep: true, After: func([]string) {
			once.Do(func() {
				go func() { closed <- c.Close() }()
				// Let Close get under way before the reply comes back.
				time.Sleep(50 * time.Millisecond)
			})
		}})
		g0 := lockcore.GrantsMade()
		sent := time.Now()
		uerr := l.Unlock(a)
		require.NoError(t, relocktest.Receive(t, closed, 10*time.Second, "Close"))
		berr := relocktest.Receive(t, res, 10*time.Second, "b's Lock")
		granted := lockcore.GrantsMade() > g0
		t.Logf("round %d: granted %v, Unlock: %v, b: %v", round, granted, uerr, berr)
		if !granted {
			continue
		}
		if berr == nil {
			continue // b holds (its Client closed: the hold ends with the window)
		}
		require.True(t, errors.Is(berr, relock.ErrClosed) || errors.Is(berr, relock.ErrNotAcquired), "b: %v", berr)
		relocktest.Eventually(t, 4*time.Second, "the lock to be free", func() bool {
			n, _ := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
			return n == 0
		})
		require.Less(t, time.Since(sent), 3500*time.Millisecond, "the lock was free only %v after the grant", time.Since(sent))
	}
}
