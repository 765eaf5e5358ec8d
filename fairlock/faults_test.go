package fairlock_test

import (
	"testing"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// faultyLock returns a fair lock on a Client whose commands go through a
// Faulty wrapper of the shared server, and a check that the lock's queue
// is empty: a failed or settled attempt leaves no place in it.
func faultyLock(t *testing.T) (*relocktest.Faulty, relocktest.Lockable, func()) {
	t.Helper()
	f := relocktest.NewFaulty(relocktest.Raw(t))
	c, err := rlock.New(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	name := relocktest.Name(t)
	empty := func() {
		t.Helper()
		if q := queue(t, f.Client, name); len(q) != 0 {
			t.Errorf("queue left = %q, want empty", q)
		}
	}
	return f, c.GetFairLock(name), empty
}

func TestErrorRepliesRetried(t *testing.T) {
	for _, msg := range relocktest.TransientErrors {
		prefix := relocktest.ErrorName(msg)
		t.Run(prefix, func(t *testing.T) {
			f, l, empty := faultyLock(t)
			relocktest.CheckAcquireErrors(t, f, l, lua.FairAcquire.SHA1, msg)
			empty()
		})
	}
}

func TestLostReplySettled(t *testing.T) {
	f, l, empty := faultyLock(t)
	relocktest.CheckLostAcquireReply(t, f, l, lua.FairAcquire.SHA1)
	empty()
}

func TestUnlockRetriesErrorReplies(t *testing.T) {
	f, l, empty := faultyLock(t)
	relocktest.CheckUnlockErrors(t, f, l, lua.FairUnlock.SHA1)
	empty()
}

func TestUnconfirmedUnlockSettled(t *testing.T) {
	f, l, empty := faultyLock(t)
	relocktest.CheckUnconfirmedUnlockSettled(t, f, l, lua.FairUnlock.SHA1)
	empty()
}
