package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35s7RedissonNotPassedOverStaleRegistration: a Client whose
// waiter got the lock stays registered (and listens on its wake channel)
// for a while after its lock channel's subscription went: the releases
// must not count that registration against the lock channel's
// subscribers, or a Redisson waiter subscribed there is passed over by a
// grant to another Client's registered waiter.
func TestReview35s7RedissonNotPassedOverStaleRegistration(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	channel := layout.Channel(name)
	a := relocktest.Client(t, rlock.WithWakeOne())
	c := relocktest.Client(t, rlock.WithWakeOne())
	j := redissontest.New(t, relocktest.Raw(t))
	a1, a2 := rlock.WithOwner(t.Context(), "a1"), rlock.WithOwner(t.Context(), "a2")
	co := rlock.WithOwner(t.Context(), "c")

	// a2 waits for a1 (registering a), and gets the lock from a1's
	// release (a grant to a's own waiter).
	require.NoError(t, a.GetLock(name).Lock(a1))
	got := make(chan error, 1)
	go func() { got <- a.GetLock(name).Lock(a2) }()
	relocktest.Eventually(t, 5*time.Second, "a's waiter to register", func() bool {
		return granteeOf(t, raw, name, a.ID()) != ""
	})
	require.NoError(t, a.GetLock(name).Unlock(a1))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "a2 to get the lock"))
	// a no longer waits: its waiter's subscription of the lock channel
	// goes after the linger (200ms), while its registration stays until
	// its deadline (3s after a2's attempt). A Client that keeps the
	// channel while it is registered stays subscribed: the wait is then
	// cut short at 600ms.
	waitFor(600*time.Millisecond, func() bool { return relocktest.Subscribers(raw, channel) == 0 })

	cGot := make(chan error, 1)
	go func() { cGot <- c.GetLock(name).Lock(co) }()
	relocktest.Eventually(t, 5*time.Second, "c's waiter to register", func() bool {
		return granteeOf(t, raw, name, c.ID()) != ""
	})
	jl := j.Lock(name)
	jctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	jGot := redissontest.Async(func() error { return jl.Lock(jctx, 1, 0) })
	redissontest.WaitSleeping(t, j, channel, 1)
	require.GreaterOrEqual(t, relocktest.Subscribers(raw, channel), int64(2), "the lock channel's subscribers (c and Redisson's waiter)")
	score, err := raw.Do(t.Context(), raw.B().Zscore().Key(layout.Wakers(name)).Member(a.ID()).Build()).AsFloat64()
	require.NoError(t, err, "a's registration")
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	require.Greater(t, score, float64(mustInt(t, now[0])*1000+mustInt(t, now[1])/1000), "a's registration is live")

	made := lockcore.GrantsMade()
	require.NoError(t, a.GetLock(name).Unlock(a2))
	require.Zero(t, lockcore.GrantsMade()-made, "the release granted the lock to c's waiter, passing over Redisson's")

	// Both waiters get the lock in turn.
	for range 2 {
		select {
		case err := <-cGot:
			require.NoError(t, err)
			require.NoError(t, c.GetLock(name).Unlock(co))
		case r := <-jGot:
			require.NoError(t, r.Err)
			require.NoError(t, jl.Unlock(t.Context(), 1))
		case <-time.After(15 * time.Second):
			t.Fatal("the waiters did not get the lock")
		}
	}
}

// waitFor waits up to d for cond, and reports whether it came true.
func waitFor(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// TestReview35s7GarbageGranteeEntry: an entry in relock_grantees that no
// Client wrote (a field of another Client or of nobody, a window longer
// than any grant's, an unknown kind, a zero window) is not granted to: a
// grant to a field its Client does not know holds the lock for the
// window, and a window read from the entry as it is could hold it for
// days. The release wakes the registered Client instead, whose waiter
// takes the lock by its attempt.
func TestReview35s7GarbageGranteeEntry(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	waiter := relocktest.Client(t, rlock.WithWakeOne())
	h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
	field := layout.Field(waiter.ID(), "w")
	for _, garbage := range []string{
		"r 3000 0 " + layout.Field("someone-else", "w"),
		"r 3000 0 nobody",
		"r 86400000 0 " + field,
		"x 3000 0 " + field,
		"r 0 0 " + field,
	} {
		require.NoError(t, holder.GetLock(name).Lock(h))
		got := make(chan error, 1)
		go func() { got <- waiter.GetLock(name).Lock(w) }()
		// Asleep: no attempt of the waiter's in flight that would write
		// its entry over the garbage.
		awaitGrantee(t, raw, name, waiter.ID())
		require.NoError(t, raw.Do(t.Context(), raw.B().Hset().Key(layout.Grantees(name)).FieldValue().
			FieldValue(waiter.ID(), garbage).Build()).Error())
		made := lockcore.GrantsMade()
		require.NoError(t, holder.GetLock(name).Unlock(h))
		require.Zero(t, lockcore.GrantsMade()-made, "the release granted the lock to the entry %q", garbage)
		require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to take the lock"))
		require.NoError(t, waiter.GetLock(name).Unlock(w))
	}
}

// TestReview35s7GranteeEntryLeavesWithClient: a Client whose waiter gave
// up leaves the wake registry at once; its grantees entry must go with
// it. The grantees hash lives as long as its latest entry (every
// registering attempt sets its expiry), so while any other Client keeps
// waiting, an entry left behind would stay for as long: one entry for
// each Client that ever waited and gave up or closed. Two ways: the
// waiter's TryLock runs out, and the Client closes while its waiter waits.
func TestReview35s7GranteeEntryLeavesWithClient(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))

	gaveUp := relocktest.Client(t, rlock.WithWakeOne())
	ok, err := gaveUp.GetLock(name).TryLock(rlock.WithOwner(t.Context(), "g"), 300*time.Millisecond, 0)
	require.NoError(t, err)
	require.False(t, ok)
	require.False(t, registered(t, raw, name, gaveUp.ID()), "registered after its waiter gave up")
	require.Empty(t, granteeOf(t, raw, name, gaveUp.ID()), "the grantees entry of a Client whose waiter gave up")

	closing, err := rlock.New(relocktest.Raw(t), rlock.WithWakeOne())
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() { got <- closing.GetLock(name).Lock(rlock.WithOwner(t.Context(), "c")) }()
	relocktest.Eventually(t, 5*time.Second, "the closing Client's waiter to register", func() bool {
		return granteeOf(t, raw, name, closing.ID()) != ""
	})
	require.NoError(t, closing.Close())
	require.Error(t, relocktest.Receive(t, got, 5*time.Second, "the closing Client's Lock to end"))
	require.False(t, registered(t, raw, name, closing.ID()), "registered after Close")
	require.Empty(t, granteeOf(t, raw, name, closing.ID()), "the grantees entry of a closed Client")
	require.NoError(t, holder.GetLock(name).Unlock(h))
}

// TestReview35s7DeadGranteeEntryDropped: a release that drops the
// registration of a Client that died (its wake channel has no
// subscriber) or whose deadline passed drops its grantees entry too:
// nothing else would while other Clients keep the hash alive.
func TestReview35s7DeadGranteeEntryDropped(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	now, err := raw.Do(t.Context(), raw.B().Time().Build()).AsStrSlice()
	require.NoError(t, err)
	ms := float64(mustInt(t, now[0]) * 1000)
	require.NoError(t, raw.Do(t.Context(), raw.B().Zadd().Key(layout.Wakers(name)).ScoreMember().
		ScoreMember(ms+60000, "dead-client").ScoreMember(ms-1000, "late-client").Build()).Error())
	for _, id := range []string{"dead-client", "late-client"} {
		require.NoError(t, raw.Do(t.Context(), raw.B().Hset().Key(layout.Grantees(name)).FieldValue().
			FieldValue(id, "r 3000 0 "+layout.Field(id, "w")).Build()).Error())
	}
	require.NoError(t, holder.GetLock(name).Unlock(h))
	for _, id := range []string{"dead-client", "late-client"} {
		require.False(t, registered(t, raw, name, id), "%s's registration", id)
		require.Empty(t, granteeOf(t, raw, name, id), "%s's grantees entry", id)
	}
}
