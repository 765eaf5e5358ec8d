package redissontest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
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

// Check fails t when parties overlapped beyond the limit, or none entered.
func (s *Section) Check(t testing.TB, wantEntries int) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.overlaps) > 0 {
		t.Errorf("%d overlaps in the critical section, the first: %s", len(s.overlaps), s.overlaps[0])
	}
	if s.entries != wantEntries {
		t.Errorf("%d entries into the critical section, want %d", s.entries, wantEntries)
	}
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

// Subscribers is PUBSUB NUMSUB of channel on the server of rdb.
func Subscribers(ctx context.Context, rdb rueidis.Client, channel string) (int64, error) {
	vals, err := rdb.Do(ctx, rdb.B().PubsubNumsub().Channel(channel).Build()).ToArray()
	if err != nil {
		return 0, err
	}
	if len(vals) != 2 {
		return 0, fmt.Errorf("PUBSUB NUMSUB %s: unexpected reply %v", channel, vals)
	}
	return vals[1].AsInt64()
}

// WaitSubscribers waits (polling, up to 5s) until channel has at least n
// subscribers on the server of rdb, and fails t if it never has.
func WaitSubscribers(t testing.TB, rdb rueidis.Client, channel string, n int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := Subscribers(t.Context(), rdb, channel)
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d subscribers (err %v), want at least %d", channel, got, err, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
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
	select {
	case got := <-r:
		if got.Err != nil {
			t.Fatalf("%s: %v", what, got.Err)
		}
		if d := got.At.Sub(since); d > HandoffBound {
			t.Errorf("%s went on %v after the release, want under %v", what, d.Round(time.Millisecond), HandoffBound)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: still waiting 5s after the release", what)
	}
}

// Pending fails t when r has already come: the waiter must still wait.
func Pending(t testing.TB, r <-chan Result, what string) {
	t.Helper()
	select {
	case got := <-r:
		t.Fatalf("%s went on (err %v), want it still waiting", what, got.Err)
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
				time.Sleep(hold)
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
		t.Error(err)
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
	if err := dc.Do(t.Context(), dc.B().Subscribe().Channel(channel).Build()).Error(); err != nil {
		t.Fatalf("SUBSCRIBE %s: %v", channel, err)
	}
	return msgs
}

// Message waits (up to 5s) for the next message of msgs and fails t
// unless it is want.
func Message(t testing.TB, msgs <-chan string, want, what string) {
	t.Helper()
	select {
	case got := <-msgs:
		if got != want {
			t.Errorf("%s published %q, want %q", what, got, want)
		}
	case <-time.After(5 * time.Second):
		t.Errorf("%s published nothing, want %q", what, want)
	}
}

// NoMessage fails t when msgs holds a message now.
func NoMessage(t testing.TB, msgs <-chan string, what string) {
	t.Helper()
	select {
	case got := <-msgs:
		t.Errorf("%s published %q, want nothing", what, got)
	default:
	}
}
