package rlock_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// Session 9's review of the deadlock detector's own-Client view: a look
// reads the waits of its own Client's owners from the Client's book, the
// other Clients read them from the Client's record hash. Where the two
// differ for longer than a moment, the members of one strongly connected
// set must still name the same victim.

// s9Server is the server's clock in ms.
func s9Server(t *testing.T, raw rueidis.Client) int64 {
	t.Helper()
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	sec, _ := strconv.ParseInt(now[0], 10, 64)
	usec, _ := strconv.ParseInt(now[1], 10, 64)
	return sec*1000 + usec/1000
}

// s9Wait runs lock on o's context on a goroutine of its own, then then
// with lock's result, and returns that result.
func s9Wait(t *testing.T, o string, lock func(context.Context) error, then func(error)) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(rlock.WithOwner(t.Context(), o), 10*time.Second)
		defer cancel()
		err := lock(ctx)
		then(err)
		done <- err
	}()
	return done
}

// TestReview35s9LostRecordReplyOneVictim: a1 and a2 (Client A) read RW;
// b (Client B) holds P and waits for RW's write side; a2, then a1, wait
// for P. a2's record is written but its reply is lost: Redis has it, A
// takes it for unwritten (until a tick writes it again). The cycles b,a1
// and b,a2 share b's wait, and b's look (which reads A's hash) names it:
// b ends. a1's look must name the same victim, not itself (which it would
// from a view without a2's wait: b,a1 alone, a1 its youngest), else two
// waits end where one does.
func TestReview35s9LostRecordReplyOneVictim(t *testing.T) {
	const after = 200 * time.Millisecond
	raw := relocktest.Raw(t)
	var f *relocktest.Faulty
	a := relocktest.SlowClient(t, 0, func(rdb rueidis.Client) rueidis.Client {
		f = relocktest.NewFaulty(rdb)
		return f
	}, rlock.WithDeadlockDetection(after))
	// B looks later than a1: a1's look comes first.
	b := relocktest.Client(t, rlock.WithDeadlockDetection(10*after))
	rw, p := relocktest.Name(t), relocktest.Name(t)
	own := func(o string) context.Context { return rlock.WithOwner(t.Context(), o) }
	require.NoError(t, a.GetReadWriteLock(rw).ReadLock().Lock(own("a1")))
	require.NoError(t, a.GetReadWriteLock(rw).ReadLock().Lock(own("a2")))
	require.NoError(t, b.GetLock(p).Lock(own("b")))

	eb := s9Wait(t, "b", b.GetReadWriteLock(rw).WriteLock().Lock, func(err error) {
		if err == nil {
			_ = b.GetReadWriteLock(rw).WriteLock().Unlock(own("b"))
		}
		_ = b.GetLock(p).Unlock(own("b"))
	})
	recs := awaitRecords(t, raw, b, rw, 1)
	relocktest.Eventually(t, 5*time.Second, "the server's clock past b's record", func() bool {
		return s9Server(t, raw) > recs[0].Since
	})
	a2 := layout.Field(a.ID(), "a2")
	lost := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply(),
		Match: func(args []string) bool { return strings.Contains(strings.Join(args, " "), a2) }})
	reader := func(o string) <-chan error {
		return s9Wait(t, o, a.GetLock(p).Lock, func(err error) {
			if err == nil {
				_ = a.GetLock(p).Unlock(own(o))
			}
			_ = a.GetReadWriteLock(rw).ReadLock().Unlock(own(o))
		})
	}
	ea2 := reader("a2")
	relocktest.Eventually(t, 5*time.Second, "a2's record written, its reply lost", func() bool { return lost.Hits() == 1 })
	ea1 := reader("a1")

	errs := map[string]error{}
	for o, ch := range map[string]<-chan error{"b": eb, "a1": ea1, "a2": ea2} {
		errs[o] = relocktest.Receive(t, ch, 15*time.Second, o)
	}
	victims := 0
	for _, err := range errs {
		if errors.Is(err, rlock.ErrDeadlock) {
			victims++
		}
	}
	t.Log(errs)
	require.Equal(t, 1, victims, "one wait ends: %v", errs)
	require.ErrorIs(t, errs["b"], rlock.ErrDeadlock, "the wait the cycles share")
	require.NoError(t, errs["a1"])
	require.NoError(t, errs["a2"])
}

// TestReview35s9LostRecordReplyCycleFound: a1 (Client A) holds N and
// waits for L, held by b (Client B), which waits for M, held by a2 (A),
// which waits for N; a2's record is written but its reply is lost: the
// record is in A's hash, and A takes it for unwritten until a tick writes
// it again (a third of the watchdog timeout later). a1, the youngest,
// is the victim, as b's look names it: a1's look must see a2's wait (the
// hash has it) and end a1's wait within a delay, not a tick later.
func TestReview35s9LostRecordReplyCycleFound(t *testing.T) {
	const after = 200 * time.Millisecond
	raw := relocktest.Raw(t)
	var f *relocktest.Faulty
	a := relocktest.SlowClient(t, 0, func(rdb rueidis.Client) rueidis.Client {
		f = relocktest.NewFaulty(rdb)
		return f
	}, rlock.WithDeadlockDetection(after), rlock.WithWatchdogTimeout(time.Minute))
	b := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	n, l, m := relocktest.Name(t), relocktest.Name(t), relocktest.Name(t)
	own := func(o string) context.Context { return rlock.WithOwner(t.Context(), o) }
	require.NoError(t, a.GetLock(n).Lock(own("a1")))
	require.NoError(t, b.GetLock(l).Lock(own("b")))
	require.NoError(t, a.GetLock(m).Lock(own("a2")))
	member := func(c *rlock.Client, o, hold, wait string) <-chan error {
		return s9Wait(t, o, c.GetLock(wait).Lock, func(err error) {
			if err == nil {
				_ = c.GetLock(wait).Unlock(own(o))
			}
			_ = c.GetLock(hold).Unlock(own(o))
		})
	}
	eb := member(b, "b", l, m)
	awaitRecords(t, raw, b, m, 1)
	a2 := layout.Field(a.ID(), "a2")
	lost := f.Inject(&relocktest.Rule{SHA1s: []string{lua.WaitRecord.SHA1}, N: 1, Run: true, Reply: relocktest.LostReply(),
		Match: func(args []string) bool { return strings.Contains(strings.Join(args, " "), a2) }})
	ea2 := member(a, "a2", m, n)
	relocktest.Eventually(t, 5*time.Second, "a2's record written, its reply lost", func() bool { return lost.Hits() == 1 })
	recs := awaitRecords(t, raw, a, n, 1)
	relocktest.Eventually(t, 5*time.Second, "the server's clock past a2's record", func() bool {
		return s9Server(t, raw) > recs[0].Since
	})
	start := time.Now()
	ea1 := member(a, "a1", n, l)
	err := relocktest.Receive(t, ea1, 15*time.Second, "a1")
	took := time.Since(start)
	require.ErrorIs(t, err, rlock.ErrDeadlock, "a1, the youngest, ends")
	require.Less(t, took, after+2*time.Second, "within a delay, not at the next tick")
	require.NoError(t, relocktest.Receive(t, eb, 15*time.Second, "b"))
	require.NoError(t, relocktest.Receive(t, ea2, 15*time.Second, "a2"))
}

// TestReview35s9Rings: rings of 2 to 5 owners, all of one Client, or
// alternating between two (the looks of one Client read its owners' waits
// from its book, the other's from its hash), end exactly one wait each.
func TestReview35s9Rings(t *testing.T) {
	const after = 100 * time.Millisecond
	c := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	d := relocktest.Client(t, rlock.WithDeadlockDetection(after))
	for _, mixed := range []bool{false, true} {
		for n := 2; n <= 5; n++ {
			t.Run(fmt.Sprintf("mixed=%v/n=%d", mixed, n), func(t *testing.T) {
				names := make([]string, n)
				for i := range names {
					names[i] = relocktest.Name(t)
				}
				members := make([]cycleMember, n)
				for i := range members {
					cl := c
					if mixed && i%2 == 1 {
						cl = d
					}
					members[i] = cycleMember{c: cl, owner: fmt.Sprintf("o%d", i), hold: names[i], wait: names[(i+1)%n]}
				}
				var victims []string
				for owner, err := range runCycle(t, members, 10*time.Second) {
					if err != nil {
						require.ErrorIs(t, err, rlock.ErrDeadlock, owner)
						victims = append(victims, owner)
					}
				}
				require.Len(t, victims, 1, "one wait of the ring ends")
			})
		}
	}
}
