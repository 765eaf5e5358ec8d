package rlock_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/pubsub"
	"github.com/relock-go/relock/rlock"
)

// granteeOf returns the grantees entry of the Client id for the lock name
// ("" when there is none).
func granteeOf(t *testing.T, raw rueidis.Client, name, id string) string {
	t.Helper()
	v, err := raw.Do(t.Context(), raw.B().Hget().Key(layout.Grantees(name)).Field(id).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return ""
	}
	require.NoError(t, err, "HGET grantees")
	return v
}

// grantScene is the start of the tests of one grant: a holder Client and
// a waiter Client, both with wake-one, on one lock; the holder holds it
// (owner "h"), and the waiter's call (owner "w", made by lock) sleeps,
// registered with its grantees entry (entry, as first seen); got has the
// call's result.
type grantScene struct {
	raw            rueidis.Client
	name           string
	holder, waiter *rlock.Client
	h, w           context.Context
	got            chan error
	entry          string
}

func newGrantScene(t *testing.T, lock func(l *rlock.Lock, ctx context.Context) error) *grantScene {
	t.Helper()
	sc := &grantScene{raw: relocktest.Raw(t), name: relocktest.Name(t), holder: relocktest.Client(t, rlock.WithWakeOne()),
		waiter: relocktest.Client(t, rlock.WithWakeOne()), h: rlock.WithOwner(t.Context(), "h"), w: rlock.WithOwner(t.Context(), "w"),
		got: make(chan error, 1)}
	require.NoError(t, sc.holder.GetLock(sc.name).Lock(sc.h))
	go func() { sc.got <- lock(sc.waiter.GetLock(sc.name), sc.w) }()
	sc.entry = awaitGrantee(t, sc.raw, sc.name, sc.waiter.ID())
	return sc
}

// awaitGrantee waits for the waiter Client id to be registered with its
// grantees entry for name, and for that waiter's call to sleep, and
// returns the entry. The entry is written by the waiter's refused
// attempt, before the Client has its reply: a release granting at once
// could reach the Client while the call still reads that reply, with no
// offer made yet, and the Client would give the grant back. The call's
// wait record, written once it has slept RecordAfter (its offer made
// before it sleeps), says it sleeps.
func awaitGrantee(t *testing.T, raw rueidis.Client, name, id string) string {
	t.Helper()
	var e string
	relocktest.Eventually(t, 5*time.Second, "the waiter to register with its grantee entry, and sleep", func() bool {
		e = granteeOf(t, raw, name, id)
		return e != "" && recordedWait(t, raw, id, name)
	})
	return e
}

// recordedWait reports whether the Client id has a wait record for name.
func recordedWait(t testing.TB, raw rueidis.Client, id, name string) bool {
	t.Helper()
	return recordedWaits(t, raw, id, name) > 0
}

// recordedWaits is the number of wait records of the Client id for name.
func recordedWaits(t testing.TB, raw rueidis.Client, id, name string) int {
	t.Helper()
	n := 0
	for _, r := range waitRecordsByID(t, raw, id) {
		if r.Name == name {
			n++
		}
	}
	return n
}

// TestGrantAcrossClients: with wake-one, a release hands the lock to the
// registered waiter of another Client in Redis itself: the waiter's Lock
// returns with no attempt after the release, its field holds the lock,
// the grantees entry is used up, and its Client confirms the hold (its
// lease goes from the 3s window to the watchdog's). A fenced lock's grant
// takes the next token.
func TestGrantAcrossClients(t *testing.T) {
	for _, fenced := range []bool{false, true} {
		t.Run(map[bool]string{false: "lock", true: "fenced"}[fenced], func(t *testing.T) {
			raw := relocktest.Raw(t)
			name := relocktest.Name(t)
			holder := relocktest.Client(t, rlock.WithWakeOne())
			f := relocktest.NewFaulty(redistest.Shared(t).Client(t))
			sha := lua.LockAcquire.SHA1
			if fenced {
				sha = lua.FencedAcquire.SHA1
			}
			attempts := f.Inject(&relocktest.Rule{SHA1s: []string{sha}, N: -1, Run: true, Keep: true})
			waiter, err := rlock.New(f, rlock.WithWakeOne())
			require.NoError(t, err)
			t.Cleanup(func() { _ = waiter.Close() })

			h, w := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "w")
			var first int64
			if fenced {
				first, err = holder.GetFencedLock(name).LockAndGetToken(h)
			} else {
				err = holder.GetLock(name).Lock(h)
			}
			require.NoError(t, err)
			landed := lockcore.GrantsLanded()
			got := make(chan int64, 1)
			go func() {
				if fenced {
					tok, err := waiter.GetFencedLock(name).LockAndGetToken(w)
					assert.NoError(t, err)
					got <- tok
					return
				}
				assert.NoError(t, waiter.GetLock(name).Lock(w))
				got <- 0
			}()
			relocktest.Eventually(t, 5*time.Second, "the waiter to register with its grantee entry", func() bool {
				return granteeOf(t, raw, name, waiter.ID()) != "" && attempts.Hits() >= 2 &&
					recordedWait(t, raw, waiter.ID(), name) // asleep (see awaitGrantee)
			})
			before := attempts.Hits()
			if fenced {
				require.NoError(t, holder.GetFencedLock(name).Unlock(h))
			} else {
				require.NoError(t, holder.GetLock(name).Unlock(h))
			}
			tok := relocktest.Receive(t, got, 5*time.Second, "the waiter to be granted the lock")
			assert.Equal(t, before, attempts.Hits(), "attempts of the waiter after the release: the grant needs none")
			assert.GreaterOrEqual(t, lockcore.GrantsLanded()-landed, int64(1), "grants landed")
			if fenced {
				assert.Equal(t, first+1, tok, "the granted hold's token")
			}
			field := layout.Field(waiter.ID(), "w")
			n, err := raw.Do(t.Context(), raw.B().Hget().Key(name).Field(field).Build()).AsInt64()
			require.NoError(t, err)
			assert.Equal(t, int64(1), n, "the waiter's count")
			assert.Empty(t, granteeOf(t, raw, name, waiter.ID()), "the grantee entry is used up")
			relocktest.Eventually(t, 5*time.Second, "the granted hold to be confirmed (its lease past the window)", func() bool {
				ttl, err := raw.Do(t.Context(), raw.B().Pttl().Key(name).Build()).AsInt64()
				return err == nil && ttl > 3000
			})
			if fenced {
				require.NoError(t, waiter.GetFencedLock(name).Unlock(w))
			} else {
				require.NoError(t, waiter.GetLock(name).Unlock(w))
			}
			n, err = raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
			require.NoError(t, err)
			assert.Zero(t, n, "the lock is free")
		})
	}
}

// TestGrantAcrossClientsGivenBack: the grantee entry names a waiter whose
// call is no longer there (it gave up, another of its Client's waiters
// still waits): the release grants the lock to it all the same; its
// Client gives the grant back at once, which frees the lock and wakes the
// Client's live waiter, which takes it, well before any retry of its own
// would (1 to 2s) and before the window (3s) would end.
func TestGrantAcrossClientsGivenBack(t *testing.T) {
	sc := newGrantScene(t, (*rlock.Lock).Lock)
	raw, name, holder, waiter, h, w, got := sc.raw, sc.name, sc.holder, sc.waiter, sc.h, sc.w, sc.got
	ghost := layout.Field(waiter.ID(), "ghost")
	require.NoError(t, raw.Do(t.Context(), raw.B().Hset().Key(layout.Grantees(name)).FieldValue().
		FieldValue(waiter.ID(), "r 3000 "+strconv.FormatInt(0, 10)+" "+ghost).Build()).Error())
	returned := lockcore.GrantsReturned()
	start := time.Now()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the live waiter to take the lock"))
	d := time.Since(start)
	assert.Less(t, d, 900*time.Millisecond, "the live waiter's take-over after the release")
	assert.GreaterOrEqual(t, lockcore.GrantsReturned()-returned, int64(1), "grants given back")
	n, err := raw.Do(t.Context(), raw.B().Hexists().Key(name).Field(ghost).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, n, "the ghost's granted field is gone")
	require.NoError(t, waiter.GetLock(name).Unlock(w))
}

// TestGrantAcrossClientsStoppedGrantee: the registered Client first in
// turn is stopped (SIGSTOP) while its waiter waits: the release grants the
// lock to it, and nothing confirms or gives back the grant. The lock is
// held for the window (3s) only: another Client's registered waiter takes
// it within the window plus its retry bound (2s).
func TestGrantAcrossClientsStoppedGrantee(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	other := relocktest.Client(t, rlock.WithWakeOne())
	h := rlock.WithOwner(t.Context(), "h")
	require.NoError(t, holder.GetLock(name).Lock(h))
	child, id := startWakeChild(t, name, "wait")
	relocktest.Eventually(t, 5*time.Second, "the child's waiter to register with its grantee entry", func() bool {
		return granteeOf(t, raw, name, id) != ""
	})
	got := make(chan error, 1)
	go func() { got <- other.GetLock(name).Lock(rlock.WithOwner(t.Context(), "o")) }()
	relocktest.Eventually(t, 5*time.Second, "the other waiter to register", func() bool {
		return granteeOf(t, raw, name, other.ID()) != ""
	})
	child.Stop(t)
	start := time.Now()
	require.NoError(t, holder.GetLock(name).Unlock(h))
	n, err := raw.Do(t.Context(), raw.B().Hexists().Key(name).Field(layout.Field(id, "w")).Build()).AsInt64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the release granted the lock to the stopped Client's waiter")
	require.NoError(t, relocktest.Receive(t, got, 10*time.Second, "the other waiter to take the lock"))
	d := time.Since(start)
	t.Logf("the other waiter took the lock %v after the release", d.Round(time.Millisecond))
	assert.Less(t, d, 5500*time.Millisecond, "within the window and a retry")
	require.NoError(t, other.GetLock(name).Unlock(rlock.WithOwner(t.Context(), "o")))
}

// TestGrantMessageNotForAttempt: a grant message that does not answer the
// waiter's latest registering attempt is not taken; the Client gives it
// back (here there is nothing in Redis to give back: the messages are
// forged, and the lock is another's), and the waiter sleeps on and takes
// the lock at its release. Two ways: the message's stamp is not that of
// the waiter's last attempt (a grant made from an older entry, whose
// hold may have ended with its window since), and another call of the
// owner used the owner's call slot after that attempt (it could have
// taken the granted field over, or settled it away).
func TestGrantMessageNotForAttempt(t *testing.T) {
	sc := newGrantScene(t, (*rlock.Lock).Lock)
	raw, name, holder, waiter, h, w, got, entry := sc.raw, sc.name, sc.holder, sc.waiter, sc.h, sc.w, sc.got, sc.entry
	parts := strings.SplitN(entry, " ", 4)
	require.Len(t, parts, 4, "grantee entry %q", entry)
	stamp, err := strconv.ParseInt(parts[2], 10, 64)
	require.NoError(t, err)
	field := layout.Field(waiter.ID(), "w")
	require.Equal(t, field, parts[3], "the entry's field")
	forge := func(stamp int64) {
		t.Helper()
		returned := lockcore.GrantsReturned()
		msg := layout.GrantMessagePrefix + "r 0 " + strconv.FormatInt(stamp, 10) + " " + field
		require.NoError(t, raw.Do(t.Context(), raw.B().Publish().Channel(layout.WakeChannel(name, waiter.ID())).Message(msg).Build()).Error())
		relocktest.Eventually(t, 5*time.Second, "the Client to give the grant back", func() bool {
			return lockcore.GrantsReturned() > returned
		})
		select {
		case err := <-got:
			t.Fatalf("the waiter's Lock returned (%v) on a grant that was not its attempt's", err)
		default:
		}
	}
	// A stamp other than the last attempt's.
	forge(stamp - 1)
	// The right stamp, after another call of the owner used the slot (a
	// TryLock with no wait, refused: it does not register). The waiter's
	// own attempts register again every second or two (its retries), and
	// one that falls between the TryLock and the forged grant takes the
	// slot after it: the grant, made from that attempt's entry, is then
	// the waiter's to take, or (read before it) not its attempt's stamp.
	// Neither tells whether the slot is looked at, so the step is made
	// again until the entry is the same before the TryLock and after the
	// grant was given back.
	stampOf := func() int64 {
		t.Helper()
		parts := strings.SplitN(granteeOf(t, raw, name, waiter.ID()), " ", 4)
		require.Len(t, parts, 4, "grantee entry %q", parts)
		n, err := strconv.ParseInt(parts[2], 10, 64)
		require.NoError(t, err)
		return n
	}
	for try := 0; ; try++ {
		require.Less(t, try, 10, "the waiter's retries fell into every try")
		before := stampOf()
		ok, err := waiter.GetLock(name).TryLock(w, 0, 0)
		require.NoError(t, err)
		require.False(t, ok)
		if stampOf() != before {
			continue
		}
		forge(before)
		if stampOf() == before {
			break
		}
	}
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to take the lock at the release"))
	require.NoError(t, waiter.GetLock(name).Unlock(w))
}

// TestGrantAcrossClientsNotPastUnregistered: a Client whose registration
// outlives its waiter (its waiter got the lock, and releases it later)
// is still counted as live by a release; it keeps the lock's channel
// subscribed as long as that, so that the channel's subscribers still
// outnumber the live registrations while a waiter that is not registered
// (Redisson's) waits: the release does not grant the lock to a registered
// Client's waiter past it, and publishes. Without that, the Client's
// subscription would end with the hub's linger (pubsub.DefaultLinger)
// and the release would grant past Redisson's waiter without a word.
func TestGrantAcrossClientsNotPastUnregistered(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	ch := layout.Channel(name)
	holder := relocktest.Client(t, rlock.WithWakeOne())
	a := relocktest.Client(t, rlock.WithWakeOne())
	b := relocktest.Client(t, rlock.WithWakeOne())
	h, ao, bo := rlock.WithOwner(t.Context(), "h"), rlock.WithOwner(t.Context(), "a"), rlock.WithOwner(t.Context(), "b")
	require.NoError(t, holder.GetLock(name).Lock(h))
	gotA := make(chan error, 1)
	go func() { gotA <- a.GetLock(name).Lock(ao) }()
	relocktest.Eventually(t, 5*time.Second, "a's waiter to register", func() bool { return granteeOf(t, raw, name, a.ID()) != "" })
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, gotA, 5*time.Second, "a's waiter to get the lock"))
	gotB := make(chan error, 1)
	go func() { gotB <- b.GetLock(name).Lock(bo) }()
	relocktest.Eventually(t, 5*time.Second, "b's waiter to register", func() bool { return granteeOf(t, raw, name, b.ID()) != "" })
	// a has no waiter left: the hub's own linger of the lock's channel
	// ends now; a's registration (3s from its last attempt) does not.
	// Nothing to wait for in the fixed code: give the linger its time.
	time.Sleep(3 * pubsub.DefaultLinger)
	before := numsub(raw, ch)
	j := redissontest.New(t, relocktest.Raw(t))
	jctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	gotJ := make(chan error, 1)
	go func() { gotJ <- j.Lock(name).Lock(jctx, 1, 0) }()
	relocktest.Eventually(t, 5*time.Second, "Redisson's waiter to subscribe", func() bool { return numsub(raw, ch) == before+1 })
	t.Logf("subscribers of the lock's channel: %d (a, b and Redisson's waiter)", before+1)
	grants := lockcore.GrantsMade()
	require.NoError(t, a.GetLock(name).Unlock(ao))
	assert.Equal(t, grants, lockcore.GrantsMade(), "releases that granted the lock while Redisson's waiter waited")
	// Redisson's waiter or b's takes the lock (the release woke both).
	select {
	case err := <-gotJ:
		require.NoError(t, err)
		require.NoError(t, j.Lock(name).Unlock(t.Context(), 1))
		require.NoError(t, relocktest.Receive(t, gotB, 10*time.Second, "b's waiter to get the lock after Redisson's"))
		require.NoError(t, b.GetLock(name).Unlock(bo))
	case err := <-gotB:
		require.NoError(t, err)
		require.NoError(t, b.GetLock(name).Unlock(bo))
		require.NoError(t, relocktest.Receive(t, gotJ, 10*time.Second, "Redisson's waiter to get the lock after b's"))
		require.NoError(t, j.Lock(name).Unlock(t.Context(), 1))
	case <-time.After(10 * time.Second):
		t.Fatal("nobody took the lock after a's release")
	}
}

// TestGrantMessageTooLate: a grant message that answers the waiter's last
// attempt but comes three quarters of the window after it is not taken:
// the hold's lease counts from the attempt, and too little of it would be
// left to confirm it in. The waiter's lease is a fixed 400ms (a window of
// 400ms); the message is forged 320ms after its entry was seen (its
// attempts come 1s to 2s apart: the stamp is still that attempt's).
func TestGrantMessageTooLate(t *testing.T) {
	sc := newGrantScene(t, func(l *rlock.Lock, ctx context.Context) error { return l.LockLease(ctx, 400*time.Millisecond) })
	raw, name, holder, waiter, h, w, got, entry := sc.raw, sc.name, sc.holder, sc.waiter, sc.h, sc.w, sc.got, sc.entry
	seen := time.Now()
	parts := strings.SplitN(entry, " ", 4)
	require.Len(t, parts, 4, "grantee entry %q", entry)
	require.Equal(t, "400", parts[1], "the entry's window")
	time.Sleep(320*time.Millisecond - time.Since(seen)) // the age the test is about
	require.Equal(t, entry, granteeOf(t, raw, name, waiter.ID()), "the waiter attempted again meanwhile")
	returned := lockcore.GrantsReturned()
	msg := layout.GrantMessagePrefix + "r 0 " + parts[2] + " " + parts[3]
	require.NoError(t, raw.Do(t.Context(), raw.B().Publish().Channel(layout.WakeChannel(name, waiter.ID())).Message(msg).Build()).Error())
	relocktest.Eventually(t, 5*time.Second, "the Client to give the grant back", func() bool {
		return lockcore.GrantsReturned() > returned
	})
	select {
	case err := <-got:
		t.Fatalf("the waiter's Lock returned (%v) on a grant too late to confirm", err)
	default:
	}
	require.NoError(t, holder.GetLock(name).Unlock(h))
	require.NoError(t, relocktest.Receive(t, got, 5*time.Second, "the waiter to take the lock at the release"))
	require.NoError(t, waiter.GetLock(name).Unlock(w))
}
