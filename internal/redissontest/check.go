package redissontest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
)

// HandoffBound is how soon a release must let a waiter on the other side
// in: far under any lease or sleep a waiter would fall back on without a
// message (a holder's 30s TTL), so a hand-off within it was brought by a
// message.
const HandoffBound = 500 * time.Millisecond

// The two sides of a mixed run.
const (
	SideRelock   = "relock"
	SideRedisson = "redisson"
)

// Section counts the parties inside a critical section, for the mixed
// contention runs: at most Limit at once (1 for a lock, the permits of a
// semaphore), and, for a read-write lock, writers alone.
type Section struct {
	Limit int

	mu       sync.Mutex
	inside   int
	writers  int
	readers  int
	entries  int
	overlaps []string
	maxIn    int
	sawBoth  bool // two readers of different sides inside at once
	sides    map[string]int
}

// Enter records party (of side SideRelock or SideRedisson) entering as an
// exclusive holder (a lock's holder, a permit's holder or a writer).
func (s *Section) Enter(side, party string) { s.enter(side, party, false) }

// EnterShared records party entering as a reader.
func (s *Section) EnterShared(side, party string) { s.enter(side, party, true) }

func (s *Section) enter(side, party string, shared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sides == nil {
		s.sides = map[string]int{}
	}
	s.entries++
	s.inside++
	if shared {
		if s.writers > 0 {
			s.overlaps = append(s.overlaps, fmt.Sprintf("reader %s entered beside a writer", party))
		}
		s.readers++
		s.sides[side]++
		if s.sides[SideRelock] > 0 && s.sides[SideRedisson] > 0 {
			s.sawBoth = true
		}
	} else {
		limit := max(s.Limit, 1)
		if s.readers > 0 || s.writers >= limit {
			s.overlaps = append(s.overlaps, fmt.Sprintf("%s entered with %d inside (limit %d)", party, s.inside-1, limit))
		}
		s.writers++
	}
	s.maxIn = max(s.maxIn, s.inside)
}

// Leave records party leaving.
func (s *Section) Leave(side string, shared bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inside--
	if shared {
		s.readers--
		s.sides[side]--
	} else {
		s.writers--
	}
}

// Check fails t when parties overlapped beyond the limit, or when the
// entries were not wantEntries.
func (s *Section) Check(t testing.TB, wantEntries int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, s.overlaps, "overlaps in the critical section")
	assert.Equal(t, wantEntries, s.entries, "entries into the critical section")
}

// MaxInside is the most parties seen inside at once.
func (s *Section) MaxInside() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxIn
}

// SharedAcrossSides reports whether readers of both sides were ever
// inside at once.
func (s *Section) SharedAcrossSides() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sawBoth
}

// WaitSubscribers waits (up to 5s) until channel has at least n
// subscribers on the server of rdb, and fails t if it never has.
func WaitSubscribers(t testing.TB, rdb rueidis.Client, channel string, n int64) {
	t.Helper()
	relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("%s to have %d subscribers", channel, n),
		func() bool { return relocktest.Subscribers(rdb, channel) >= n })
}

// WaitSleeping waits (up to 5s) until n of j's waiters sleep on channel
// (see Client.Sleeping), and fails t if they never do. A Redisson waiter that
// has subscribed has not always gone to sleep yet: its attempt after
// subscribing may still be on its way, and a READ_UNLOCK_MESSAGE lets go
// only the waiters asleep when it comes (Redisson's LockPubSub), so a
// release made then passes that waiter by, and it sleeps on until the
// TTL its attempt saw. A test that checks that a release wakes Redisson's
// waiters waits for this first.
func WaitSleeping(t testing.TB, j *Client, channel string, n int) {
	t.Helper()
	relocktest.Eventually(t, 5*time.Second, fmt.Sprintf("%d Redisson waiters to sleep on %s", n, channel),
		func() bool { return j.Sleeping(channel) >= n })
}

// Async runs fn in a goroutine; its error arrives on the channel
// returned, with the time it returned.
func Async(fn func() error) <-chan Result {
	out := make(chan Result, 1)
	go func() {
		err := fn()
		out <- Result{Err: err, At: time.Now()}
	}()
	return out
}

// Result is what Async delivers.
type Result struct {
	Err error
	At  time.Time
}

// Handoff waits for r (up to 5s), fails t when it brought an error or did
// not come, and fails t when it came more than HandoffBound after since.
// what names the waiter.
func Handoff(t testing.TB, r <-chan Result, since time.Time, what string) {
	t.Helper()
	got := relocktest.Receive(t, r, 5*time.Second, what+" to go on after the release")
	require.NoError(t, got.Err, what)
	assert.LessOrEqual(t, got.At.Sub(since), HandoffBound, "how long after the release %s went on", what)
}

// Pending fails t when r has already come: the waiter must still wait.
func Pending(t testing.TB, r <-chan Result, what string) {
	t.Helper()
	select {
	case got := <-r:
		require.FailNowf(t, "went on", "%s went on (err %v), want it still waiting", what, got.Err)
	default:
	}
}

// Party is one party of a mixed contention run.
type Party struct {
	// Side is SideRelock or SideRedisson; Name names the party in
	// failures.
	Side, Name string
	// Lock takes the lock (or permit) and Unlock gives it back.
	Lock, Unlock func(ctx context.Context) error
	// Shared marks a reader.
	Shared bool
}

// Contend runs a mixed contention run: each party, in a goroutine of its
// own, takes the lock rounds times (Lock, enter sec, hold, leave sec,
// Unlock). It fails t unless every party finishes within 20s with no
// error and sec saw every entry and no overlap.
func Contend(t testing.TB, sec *Section, parties []Party, rounds int, hold time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, len(parties))
	start := time.Now()
	for _, p := range parties {
		wg.Go(func() {
			for i := range rounds {
				if err := p.Lock(ctx); err != nil {
					errs <- fmt.Errorf("%s, round %d: lock: %w", p.Name, i, err)
					return
				}
				if p.Shared {
					sec.EnterShared(p.Side, p.Name)
				} else {
					sec.Enter(p.Side, p.Name)
				}
				time.Sleep(hold) // the scenario: the holder's work inside the section
				sec.Leave(p.Side, p.Shared)
				if err := p.Unlock(context.WithoutCancel(ctx)); err != nil {
					errs <- fmt.Errorf("%s, round %d: unlock: %w", p.Name, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	sec.Check(t, len(parties)*rounds)
	t.Logf("%d parties x %d rounds in %v", len(parties), rounds, time.Since(start).Round(time.Millisecond))
}

// Listen subscribes a connection of its own from rdb to channel and
// returns the messages published there (until t ends), to show what a
// release publishes.
func Listen(t testing.TB, rdb rueidis.Client, channel string) <-chan string {
	t.Helper()
	msgs := make(chan string, 64)
	dc, cancel := rdb.Dedicate()
	t.Cleanup(cancel)
	dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		select {
		case msgs <- m.Message:
		default:
		}
	}})
	require.NoError(t, dc.Do(t.Context(), dc.B().Subscribe().Channel(channel).Build()).Error(), "SUBSCRIBE %s", channel)
	return msgs
}

// Message waits (up to 5s) for the next message of msgs and fails t
// unless it is want.
func Message(t testing.TB, msgs <-chan string, want, what string) {
	t.Helper()
	got := relocktest.Receive(t, msgs, 5*time.Second, fmt.Sprintf("%s to publish %q", what, want))
	assert.Equal(t, want, got, "what %s published", what)
}

// NoMessage fails t when msgs holds a message now.
func NoMessage(t testing.TB, msgs <-chan string, what string) {
	t.Helper()
	select {
	case got := <-msgs:
		assert.Failf(t, "published", "%s published %q, want nothing", what, got)
	default:
	}
}
