package redissontest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redissontest"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestFairOnlyRedisson: Redisson's fair lock among Redisson clients
// alone: waiters of two clients acquire in arrival order, and a
// contention run ends with every thread done.
func TestFairOnlyRedisson(t *testing.T) {
	raw := relocktest.Raw(t)
	j1 := redissontest.New(t, relocktest.Raw(t))
	j2 := redissontest.New(t, relocktest.Raw(t))
	name := relocktest.Name(t)
	holder := j1.FairLock(name)
	require.NoError(t, holder.Lock(t.Context(), 100, 0))
	// The waiters give up after 10s: a release that wakes nobody fails the
	// test then, instead of leaving wg.Wait blocked.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
		want  []string
	)
	for i := range 6 {
		l := []*redissontest.FairLock{j1.FairLock(name), j2.FairLock(name)}[i%2]
		tid := int64(i)
		want = append(want, l.Field(tid))
		wg.Go(func() {
			if !assert.NoError(t, l.Lock(ctx, tid, 0), "waiter %d", i) {
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			assert.NoError(t, l.Unlock(ctx, tid))
		})
		relocktest.Eventually(t, 5*time.Second, fmt.Sprint("waiter ", i, " queued"), func() bool {
			q, _ := raw.Do(t.Context(), raw.B().Lrange().Key(holder.Queue()).Start(0).Stop(-1).Build()).AsStrSlice()
			return len(q) == i+1
		})
	}
	q, err := raw.Do(t.Context(), raw.B().Lrange().Key(holder.Queue()).Start(0).Stop(-1).Build()).AsStrSlice()
	require.NoError(t, err)
	assert.Equal(t, want, q)
	require.NoError(t, holder.Unlock(t.Context(), 100))
	wg.Wait()
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, order, "the order the waiters acquired in")

	var parties []redissontest.Party
	for ci, j := range []*redissontest.Client{j1, j2} {
		l := j.FairLock(name)
		for tid := range int64(3) {
			parties = append(parties, redissontest.Party{Side: redissontest.SideRedisson, Name: fmt.Sprintf("j%d t%d", ci, tid),
				Lock:   func(ctx context.Context) error { return l.Lock(ctx, tid, 0) },
				Unlock: func(ctx context.Context) error { return l.Unlock(ctx, tid) }})
		}
	}
	redissontest.Contend(t, &redissontest.Section{}, parties, 6, 5*time.Millisecond)
}
