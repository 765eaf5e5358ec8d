package lockcore

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/redistest"
)

// TestReview35GrantModel: goroutines of three owners (two each, of one
// Client), and now and then an owner of another Client (whose waits stop
// grants), take a lock in turn with grants on release, with contexts that
// end at random moments, limited and unlimited waits, watched and fixed
// leases, and one script reply in 20 lost; a model of who holds what
// checks that no two owners hold at once and that an owner that holds n
// levels has at least n in Redis. (It found, about one run in two, the
// give-back that removed a granted field: TestGrantNotUndoneByGiveBack.)
func TestReview35GrantModel(t *testing.T) {
	raw := redistest.Shared(t).Client(t)
	g := &grantRDB{Client: raw}
	g.lose = func(sha string) bool { return rand.N(20) == 0 }
	c := grantCore(t, g, Config{})
	name := grantName(t, raw)
	kinds := []Kind{Reentrant{}, Fenced{}}
	seed := time.Now().UnixNano()
	t.Logf("kind %T", kinds[seed%2])
	var mu sync.Mutex
	held := map[string]int{}
	var wg sync.WaitGroup
	g0 := GrantsMade()
	end := time.Now().Add(3 * time.Second)
	c2 := grantCore(t, raw, Config{})
	for g := 0; g < 8; g++ {
		owner := "o" + strconv.Itoa(g%4)
		// One kind per run: a waiter of the other kind stops grants.
		m := NewMutex(c, name, kinds[seed%2])
		pause := time.Duration(0)
		if g%4 == 3 {
			m, pause = NewMutex(c2, name, kinds[seed%2]), 300*time.Millisecond
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				// The other Client's goroutine leaves the lock to the
				// Client's grants between its tries.
				time.Sleep(pause)
				ctx, cancel := context.WithTimeout(t.Context(), time.Duration(rand.N(20000))*time.Microsecond)
				wait := []time.Duration{5 * time.Millisecond, NoLimit}[rand.N(2)]
				_, ok, err := m.Acquire(WithOwner(ctx, owner), wait, []time.Duration{0, 10 * time.Second}[rand.N(2)])
				cancel()
				if !ok || err != nil {
					continue
				}
				mu.Lock()
				held[owner]++
				for o, n := range held {
					if o != owner && n > 0 {
						t.Errorf("%s and %s hold at once", owner, o)
					}
				}
				v := hget(t, raw, name, m.Field(owner))
				if n, _ := strconv.Atoi(v); n < held[owner] {
					t.Errorf("%s holds %d levels, Redis %q", owner, held[owner], v)
				}
				mu.Unlock()
				time.Sleep(time.Duration(rand.N(300)) * time.Microsecond)
				mu.Lock()
				held[owner]--
				if err := m.Unlock(WithOwner(t.Context(), owner)); err != nil && errors.Is(err, relock.ErrNotHeld) {
					t.Errorf("%s unlock: %v", owner, err)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if GrantsMade() == g0 {
		t.Error("no release granted")
	}
}
