package rlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/rlock"
)

// TestReview35CancelPromptWhileReleaseStalls: a's Unlock claims b's
// offer and its release ran in Redis, but its reply is stalled (a slow
// link). b's context ends meanwhile: b's Lock should return promptly
// (its context is done; whatever the grant did is settled as for a lost
// reply), not wait for another goroutine's release to answer, which may
// take up to the release's 5s timeout.
// With grants off (the control) b returns at once. Either way, b may
// have taken the lock the release freed before its context ended (it
// was not yet asleep on an offer, or woke at the release's message):
// then it holds it.
func TestReview35CancelPromptWhileReleaseStalls(t *testing.T) {
	for _, grants := range []bool{false, true} {
		t.Run(map[bool]string{false: "grants-off", true: "grants-on"}[grants], func(t *testing.T) {
			cancelPrompt(t, grants)
		})
	}
}

func cancelPrompt(t *testing.T, grants bool) {
	f := relocktest.NewFaulty(relocktest.Raw(t))
	var opts []rlock.Option
	if !grants {
		opts = append(opts, rlock.WithoutGrantOnRelease())
	}
	c, err := rlock.New(f, opts...)
	require.NoError(t, err)
	defer c.Close()
	name := relocktest.Name(t)
	l := c.GetLock(name)
	a := rlock.WithOwner(t.Context(), "a")
	require.NoError(t, l.Lock(a))
	bctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	res := make(chan error, 1)
	go func() { res <- l.Lock(rlock.WithOwner(bctx, "b")) }()
	time.Sleep(50 * time.Millisecond) // b asleep, offered
	stall := make(chan struct{})
	ran := make(chan struct{})
	var once sync.Once
	f.Inject(&relocktest.Rule{SHA1s: []string{lua.LockUnlock.SHA1}, N: 1, Run: true, Keep: true, After: func([]string) {
		once.Do(func() { close(ran) })
		<-stall
	}})
	unlocked := make(chan error, 1)
	go func() { unlocked <- l.Unlock(a) }()
	relocktest.Receive(t, ran, 5*time.Second, "the release to run")
	cancel()
	cancelled := time.Now()
	var berr error
	var took time.Duration
	select {
	case berr = <-res:
		took = time.Since(cancelled)
	case <-time.After(time.Second):
		close(stall)
		berr = relocktest.Receive(t, res, 10*time.Second, "b's Lock")
		took = time.Since(cancelled)
		require.NoError(t, relocktest.Receive(t, unlocked, 10*time.Second, "a's Unlock"))
		t.Fatalf("b's Lock returned %v only %v after its context ended (when the stalled release answered)", berr, took)
	}
	close(stall)
	require.NoError(t, relocktest.Receive(t, unlocked, 10*time.Second, "a's Unlock"))
	if berr == nil {
		// b was not asleep on an offer when the release ran (the sleep
		// above is no event), or, with grants off, woke at its message:
		// its attempt took the lock the release freed before its
		// context ended. Prompt all the same; it holds the lock.
		require.Equal(t, "1", relocktest.HGetAll(t, relocktest.Raw(t), name)[c.ID()+":b"])
		require.NoError(t, l.Unlock(rlock.WithOwner(t.Context(), "b")))
		t.Log("b acquired the lock before its context ended")
		return
	}
	t.Logf("b returned %v after %v", berr, took)
}
