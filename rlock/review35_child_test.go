package rlock_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

const review35ChildEnv = "RELOCK_REVIEW35_CHILD"

// TestReview35Child runs in a child process of TestReview35KilledAfterGrant:
// it hands a lock from owner a to a waiting owner b by a grant, says so,
// and waits to be killed.
func TestReview35Child(t *testing.T) {
	v := os.Getenv(review35ChildEnv)
	if v == "" {
		t.Skip("only in a child process of TestReview35KilledAfterGrant")
	}
	f := strings.Split(v, "\x1f")
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{f[0]}, DisableCache: true})
	if err != nil {
		relocktest.ChildSay("error %v", err)
		return
	}
	defer c.Close()
	l := c.GetLock(f[1])
	a := rlock.WithOwner(context.Background(), "a")
	b := rlock.WithOwner(context.Background(), "b")
	for round := range 50 {
		if err := l.Lock(a); err != nil {
			relocktest.ChildSay("error %v", err)
			return
		}
		res := make(chan error, 1)
		go func() { res <- l.Lock(b) }()
		time.Sleep(time.Duration(round+1) * 5 * time.Millisecond)
		g0 := lockcore.GrantsMade()
		_ = l.Unlock(a)
		if err := <-res; err != nil {
			relocktest.ChildSay("error %v", err)
			return
		}
		if lockcore.GrantsMade() > g0 {
			relocktest.ChildSay("granted")
			relocktest.ChildWait()
			return
		}
		_ = l.Unlock(b)
	}
	relocktest.ChildSay("error no grant")
}

// TestReview35KilledAfterGrant: a process whose release granted the lock
// to its own waiter is killed (SIGKILL) right after: the lock must be
// free within the confirmation window (3s), not the watchdog's 30s.
func TestReview35KilledAfterGrant(t *testing.T) {
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	p, err := relocktest.StartChild("TestReview35Child", review35ChildEnv+"="+redistest.Shared(t).Addr+"\x1f"+name)
	require.NoError(t, err)
	t.Cleanup(p.Kill)
	line, err := p.Expect("granted", 20*time.Second)
	require.NoError(t, err, "child: %s %s", line, p.Stderr())
	said := time.Now()
	p.Kill()
	relocktest.Eventually(t, 5*time.Second, "the lock to be free", func() bool {
		n, _ := raw.Do(t.Context(), raw.B().Exists().Key(name).Build()).AsInt64()
		return n == 0
	})
	t.Logf("free %v after the child said granted", time.Since(said))
	require.Less(t, time.Since(said), 3200*time.Millisecond)
}
