package rlock_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35MixedOwnersUnderGrants: goroutines of one Client take a
// FencedLock in turn while grants flow: four owners of three goroutines
// each (same-owner goroutines re-enter), anonymous goroutines (Lock and
// Unlock without an owner: a fresh owner per acquisition), and goroutines
// with fixed leases (LockLease). Held: exclusion between owners (no
// owner takes the lock while another holds), a new hold's token above
// every earlier hold's, a re-entry's token the hold's, and once all have
// unlocked, the lock is free at once (no count left over in Redis).
func TestReview35MixedOwnersUnderGrants(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetFencedLock(name)
	var (
		mu        sync.Mutex
		holder    string // the owner that holds, "" when none
		count     int    // its goroutines inside
		holdToken int64
		lastToken int64
		lastOwner string
		turns     int
		fails     []string
	)
	enter := func(owner string, token int64) {
		mu.Lock()
		defer mu.Unlock()
		turns++
		switch {
		case holder == "":
			// (the same owner's hold, still held in Redis: one goroutine
			// left the model before its Unlock, another re-entered)
			if token <= lastToken && (owner != lastOwner || token != lastToken) {
				fails = append(fails, "owner "+owner+" got token "+strconv.FormatInt(token, 10)+" after "+strconv.FormatInt(lastToken, 10))
			}
			holder, count, holdToken, lastToken, lastOwner = owner, 1, token, token, owner
		case holder == owner:
			count++
			if token != holdToken {
				fails = append(fails, "re-entry of "+owner+" got token "+strconv.FormatInt(token, 10)+", the hold's is "+strconv.FormatInt(holdToken, 10))
			}
		default:
			fails = append(fails, owner+" took the lock while "+holder+" held it")
		}
	}
	leave := func(owner string) {
		mu.Lock()
		defer mu.Unlock()
		if holder == owner {
			if count--; count == 0 {
				holder = ""
			}
		}
	}
	ctx, stop := context.WithTimeout(t.Context(), 3*time.Second)
	defer stop()
	g0 := lockcore.GrantsMade()
	var wg sync.WaitGroup
	run := func(owner string, lock func(ctx context.Context) error, unlock func(ctx context.Context) error) {
		wg.Go(func() {
			for ctx.Err() == nil {
				o := context.Background()
				if owner != "" {
					o = rlock.WithOwner(o, owner)
				}
				lctx, cancel := context.WithCancel(o)
				stopAt := context.AfterFunc(ctx, cancel)
				err := lock(lctx)
				stopAt()
				cancel()
				if err != nil {
					require.ErrorIs(t, err, context.Canceled)
					return
				}
				tok, err := l.Token(o)
				if err != nil {
					t.Errorf("Token of %q: %v", owner, err)
				}
				who := owner
				if who == "" {
					who = "anon-" + strconv.FormatInt(tok, 10)
				}
				enter(who, tok)
				time.Sleep(200 * time.Microsecond)
				leave(who)
				if err := unlock(o); err != nil {
					t.Errorf("Unlock of %q: %v", owner, err)
					return
				}
			}
		})
	}
	for i := range 4 {
		for range 3 {
			run("o"+strconv.Itoa(i), l.Lock, l.Unlock)
		}
	}
	for range 3 {
		run("", l.Lock, l.Unlock)
	}
	for range 2 {
		run("fixed", func(ctx context.Context) error { return l.LockLease(ctx, 10*time.Second) }, l.Unlock)
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d turns, %d grants", turns, lockcore.GrantsMade()-g0)
	if len(fails) > 0 {
		t.Fatalf("%d violations, the first: %q", len(fails), fails[:min(5, len(fails))])
	}
	n, err := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	require.Zero(t, n, "all unlocked, the lock is still held: %v", relocktest.HGetAll(t, raw, name))
}
