package rlock_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCheckerStarvedLossExplained: a hold on the watchdog lease whose
// process does not run for longer than the lease (here stopped with
// SIGSTOP, as a machine with every core busy starves it) cannot be
// renewed: its Client reports it lost when it runs again, with no
// renewal sent (ErrExpired, no renewal error). The checker must judge
// that loss explained by the stall it saw, not causeless (flake hunt of
// issue 32, failure D: a FencedLock lost at load 10, no fault able to
// end it, no renewal sent).
func TestCheckerStarvedLossExplained(t *testing.T) {
	e := newEngine(t, lockKinds()[1], uint64(time.Now().UnixNano())) // FencedLock
	m := e.m.(*holdsModel)
	var holder *howner
	for _, o := range m.owners {
		if o.slot == 0 && !o.anonymous && o.name != "do" {
			holder = o
			break
		}
	}
	require.NotNil(t, holder)
	sd := m.sides()[0]
	ctx, s, l := m.handle(holder, sd)
	e.logf("round 1: starved holder, fault none")
	m.acquire(holder, sd, ctx, s, "Lock (to be starved)", chkSetup, false, func(ctx context.Context) (bool, int64, error) {
		return true, 0, l.Lock(ctx)
	}, 0)
	// This process stops for one and a half leases: a shell, its child,
	// stops it and lets it go on.
	stall := chkLease * 3 / 2
	script := fmt.Sprintf("kill -STOP $PPID; sleep %.3f; kill -CONT $PPID", stall.Seconds())
	require.NoError(t, exec.Command("sh", "-c", script).Run())
	require.True(t, until(2*time.Second, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return !holder.s[sd].lostAt.IsZero()
	}), "no loss reported after the process stalled for %v", stall)
	m.checkpoint()
	e.closeAll()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.failed {
		t.Logf("history:\n%s", strings.Join(e.history, "\n"))
	}
	assert.Equal(t, 1, e.counts["loss:starved"], "the loss judged explained by the stall")
}
