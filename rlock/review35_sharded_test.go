package rlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview35ShardedVersusClassic: the looping Client uses sharded
// pub/sub (its releases count SHARDNUMSUB), the waiting Client classic
// pub/sub (SUBSCRIBE, which SHARDNUMSUB does not count). WithShardedPubSub
// documents the mix as unsupported, with the fallback that a waiter that
// hears nothing "goes on when the lease it last saw runs out"; grants keep
// the lock from ever being free, so the fallback never comes. Low
// severity (a misconfiguration), same cause as TestReview35OtherKinds-
// NotStarved. Compared with grants off.
func TestReview35ShardedVersusClassic(t *testing.T) {
	t.Skip("a known limit (docs/kinds.md, grant on release): a waiting call subscribes and leaves no knock, and a Client on sharded pub/sub does not count a classic subscriber; WithShardedPubSub does not support the mix")
	waiter := func(t *testing.T, name string, wait time.Duration) (bool, error) {
		l := relocktest.Client(t).GetLock(name)
		o := rlock.WithOwner(t.Context(), "classic")
		ctx, cancel := context.WithTimeout(o, wait)
		defer cancel()
		err := l.Lock(ctx)
		if err != nil {
			return false, nil
		}
		_ = l.Unlock(o)
		return true, nil
	}
	okOff, _, _ := loopAndWait(t, []rlock.Option{rlock.WithShardedPubSub(), rlock.WithoutGrantOnRelease()}, waiter)
	okOn, grants, _ := loopAndWait(t, []rlock.Option{rlock.WithShardedPubSub()}, waiter)
	t.Logf("grants off: %v; grants on: %v (%d grants)", okOff, okOn, grants)
	if okOff && !okOn {
		t.Errorf("a classic pub/sub waiter starved by a sharded Client's grants (%d), got the lock with grants off", grants)
	}
}
