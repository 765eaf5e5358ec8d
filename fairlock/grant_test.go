package fairlock_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// fairField is the hash field of owner of c.
func fairField(c *rlock.Client, owner string) string { return layout.Field(c.ID(), owner) }

// TestReleaseGrantsHeadOfItsClient: the last Unlock of a fair lock grants
// it, in the release, to a waiter of the same Client that heads the
// queue: the waiter holds it with a count of 1, out of the queue, and
// its Client confirms the hold (its lease goes from the window to the
// watchdog's). A waiter is granted only while it sleeps (it offers
// itself then): a release that finds it between two attempts wakes it,
// and the test tries again, up to ten times. A poller of the Client
// (TryLock with wait 0) refused just before the release does not hold the
// grant back, as it holds a plain lock's: it could not take the lock past
// the queue anyway.
func TestReleaseGrantsHeadOfItsClient(t *testing.T) {
	for _, poll := range []bool{false, true} {
		t.Run("poller refused "+strconv.FormatBool(poll), func(t *testing.T) { releaseGrantsHead(t, poll) })
	}
}

func releaseGrantsHead(t *testing.T, poll bool) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	holder := rlock.WithOwner(t.Context(), "holder")
	waiter := rlock.WithOwner(t.Context(), "waiter")
	for try := 0; ; try++ {
		if try == 10 {
			t.Fatal("no release granted the lock in ten tries")
		}
		if err := l.Lock(holder); err != nil {
			t.Fatal(err)
		}
		errc := make(chan error, 1)
		go func() { errc <- l.Lock(waiter) }()
		relocktest.Eventually(t, 5*time.Second, "the waiter queued", func() bool {
			return slices.Equal(queue(t, raw, name), []string{fairField(c, "waiter")})
		})
		if poll {
			if ok, err := l.TryLock(rlock.WithOwner(t.Context(), "poller"), 0, 0); ok || err != nil {
				t.Fatalf("poller: %v %v, want refused", ok, err)
			}
		}
		g0 := lockcore.GrantsMade()
		if err := l.Unlock(holder); err != nil {
			t.Fatal(err)
		}
		if err := relocktest.Receive(t, errc, 5*time.Second, "the waiter's Lock"); err != nil {
			t.Fatal(err)
		}
		granted := lockcore.GrantsMade() - g0
		if got := relocktest.HGetAll(t, raw, name); len(got) != 1 || got[fairField(c, "waiter")] != "1" {
			t.Fatalf("hash after the hand-off: %v, want the waiter's field at 1", got)
		}
		if q := queue(t, raw, name); len(q) != 0 {
			t.Fatalf("queue after the hand-off: %v, want empty", q)
		}
		if granted == 1 {
			// The window's lease (3s) becomes the watchdog's once the
			// Client confirms the hold.
			relocktest.Eventually(t, 5*time.Second, "the granted hold confirmed", func() bool {
				pttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
				return err == nil && pttl > 3000
			})
			if err := l.Unlock(waiter); err != nil {
				t.Fatal(err)
			}
			t.Logf("granted on try %d", try+1)
			return
		}
		if err := l.Unlock(waiter); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReleaseGrantsOnlyTheHead: a release grants only to the head of the
// queue. A waiter of another Client heads it, a waiter of the releasing
// Client sleeps behind: the release wakes the head, which takes the lock,
// and the Client's own waiter takes it after, from the head's release.
func TestReleaseGrantsOnlyTheHead(t *testing.T) {
	c1 := relocktest.Client(t)
	c2 := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := heldBy(t, c1.GetFairLock(name), "holder")
	type result struct {
		who string
		err error
	}
	got := make(chan result, 2)
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, w := range []struct {
		c   *rlock.Client
		who string
	}{{c2, "other"}, {c1, "own"}} {
		n := len(queue(t, raw, name)) + 1
		wg.Go(func() {
			ctx := rlock.WithOwner(t.Context(), w.who)
			l := w.c.GetFairLock(name)
			err := l.Lock(ctx)
			got <- result{w.who, err}
			if err == nil {
				// Held a moment, while the test reads the hash.
				time.Sleep(10 * time.Millisecond)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
				}
			}
		})
		relocktest.Eventually(t, 5*time.Second, w.who+" queued", func() bool { return len(queue(t, raw, name)) == n })
	}
	if q, want := queue(t, raw, name), []string{fairField(c2, "other"), fairField(c1, "own")}; !slices.Equal(q, want) {
		t.Fatalf("queue %v, want %v", q, want)
	}
	if err := c1.GetFairLock(name).Unlock(holder); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"other", "own"} {
		r := relocktest.Receive(t, got, 5*time.Second, "a waiter's Lock")
		if r.who != want || r.err != nil {
			t.Fatalf("%s's Lock returned %v, want %s's first", r.who, r.err, want)
		}
	}
}

// TestGrantsKeepQueueOrder: one Client's waiters queued one after another
// take the lock in that order when each release grants it to the next
// (or wakes it), and most hand-offs are grants.
func TestGrantsKeepQueueOrder(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	l := c.GetFairLock(name)
	holder := heldBy(t, l, "holder")
	const n = 6
	var (
		mu    sync.Mutex
		order []string
		wg    sync.WaitGroup
		errs  = make(chan error, n)
	)
	for i := range n {
		who := "w" + strconv.Itoa(i)
		wg.Go(func() {
			ctx := rlock.WithOwner(t.Context(), who)
			if err := l.Lock(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", who, err)
				return
			}
			mu.Lock()
			order = append(order, who)
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", who, err)
			}
		})
		relocktest.Eventually(t, 5*time.Second, who+" queued", func() bool { return len(queue(t, raw, name)) == i+1 })
	}
	g0 := lockcore.GrantsMade()
	if err := l.Unlock(holder); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	var all error
	for err := range errs {
		all = errors.Join(all, err)
	}
	if all != nil {
		t.Fatal(all)
	}
	want := make([]string, n)
	for i := range want {
		want[i] = "w" + strconv.Itoa(i)
	}
	if !slices.Equal(order, want) {
		t.Errorf("order %v, want %v", order, want)
	}
	grants := lockcore.GrantsMade() - g0
	t.Logf("%d of %d hand-offs granted", grants, n)
	if grants == 0 {
		t.Error("no hand-off was a grant")
	}
}
