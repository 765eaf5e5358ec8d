package fairlock_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/fairlock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// TestReview12PlainHolderBesideFairWaiter: a plain Lock of the name holds
// it while a fair waiter of the same Client queues behind. The plain
// Unlock grants nothing past the queue (the fair waiter is no plain
// waiter's offer), and the fair waiter takes the lock within its refresh
// interval; the fair waiter's own release then frees it with nothing
// queued.
func TestReview12PlainHolderBesideFairWaiter(t *testing.T) {
	c := relocktest.Client(t)
	raw := relocktest.Raw(t)
	name := relocktest.Name(t)
	p := rlock.WithOwner(t.Context(), "plain")
	w := rlock.WithOwner(t.Context(), "w")
	require.NoError(t, c.GetLock(name).Lock(p))
	errc := make(chan error, 1)
	go func() { errc <- c.GetFairLock(name).Lock(w) }()
	relocktest.Eventually(t, 5*time.Second, "w queued", func() bool {
		return slices.Equal(queue(t, raw, name), []string{fairField(c, "w")})
	})
	g0 := lockcore.GrantsMade()
	start := time.Now()
	require.NoError(t, c.GetLock(name).Unlock(p))
	require.NoError(t, relocktest.Receive(t, errc, 5*time.Second, "w's Lock"))
	assert.Less(t, time.Since(start), fairlock.RefreshInterval+time.Second)
	assert.Equal(t, int64(0), lockcore.GrantsMade()-g0, "a plain release granted")
	assert.Equal(t, map[string]string{fairField(c, "w"): "1"}, relocktest.HGetAll(t, raw, name))
	assert.Empty(t, queue(t, raw, name))
	require.NoError(t, c.GetFairLock(name).Unlock(w))
	assert.Empty(t, relocktest.HGetAll(t, raw, name))
}
