package main

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// topRowOf is the line of a name in a frame of top: its columns, read from
// the end (HOLDERS may hold a space).
type topLine struct {
	kind            string
	wait            int
	longest         string
	acq, hand       float64
	acqSet, handSet bool
}

func topLineOf(t *testing.T, frame, name string) (topLine, bool) {
	t.Helper()
	for _, line := range strings.Split(frame, "\n") {
		f := strings.Fields(line)
		if len(f) < 7 || f[0] != name {
			continue
		}
		var l topLine
		var err error
		l.kind = f[1]
		n := len(f)
		l.wait, err = strconv.Atoi(f[n-4])
		require.NoError(t, err, line)
		l.longest = f[n-3]
		if f[n-2] != "-" {
			l.acq, err = strconv.ParseFloat(f[n-2], 64)
			require.NoError(t, err, line)
			l.acqSet = true
		}
		if f[n-1] != "-" {
			l.hand, err = strconv.ParseFloat(f[n-1], 64)
			require.NoError(t, err, line)
			l.handSet = true
		}
		return l, true
	}
	return topLine{}, false
}

// contend has owners of c take and release the lock got from get in a
// loop until t ends.
func contend(t *testing.T, owners int, lock func(ctx context.Context) error, unlock func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	for i := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx := rlock.WithOwner(ctx, "worker-"+strconv.Itoa(i))
			for ctx.Err() == nil {
				if err := lock(octx); err != nil {
					if !errors.Is(err, rlock.ErrNotAcquired) && ctx.Err() == nil {
						t.Errorf("worker %d: %v", i, err)
					}
					return
				}
				time.Sleep(2 * time.Millisecond)
				if err := unlock(rlock.WithOwner(context.Background(), "worker-"+strconv.Itoa(i))); err != nil {
					t.Errorf("worker %d: unlock: %v", i, err)
					return
				}
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

// TestTopOnce: top --once shows, for locks that owners contend for (a
// plain, a fenced and a fair lock), the waiters their records name, the
// longest wait, and acquisitions and hand-offs per second; a lock nobody
// uses is not shown.
func TestTopOnce(t *testing.T) {
	c := relocktest.Client(t)
	names, match := testNames(t, 4)
	plain, fenced, idle, fair := names[0], names[1], names[2], names[3]
	l := c.GetLock(plain)
	var taken atomic.Int64 // acquisitions of plain
	contend(t, 3, func(ctx context.Context) error {
		err := l.Lock(ctx)
		if err == nil {
			taken.Add(1)
		}
		return err
	}, l.Unlock)
	f := c.GetFencedLock(fenced)
	contend(t, 2, f.Lock, f.Unlock)
	// One Client's goroutines hand a fair lock over by grants on release,
	// which wake nobody: top hears the mark each grant publishes.
	fl := c.GetFairLock(fair)
	contend(t, 3, fl.Lock, fl.Unlock)
	require.NoError(t, c.GetLock(idle).Lock(rlock.WithOwner(t.Context(), "sleeper")))
	recordWait(t, "", c.ID(), "worker-9", plain, "lock", 3*time.Second)
	recordWait(t, "", c.ID(), "worker-8", plain, "lock", time.Second)

	before := taken.Load()
	r := relock(t, "top", "--once", "--interval", "500ms", "--redis", server(t).Addr, "--match", match)
	wantCode(t, r, exitOK)
	during := taken.Load() - before
	frame := r.stdout
	assert.Contains(t, frame, "NAME ")
	p, ok := topLineOf(t, frame, plain)
	require.True(t, ok, "no line for %s:\n%s", plain, frame)
	assert.Equal(t, "lock", p.kind)
	assert.GreaterOrEqual(t, p.wait, 2, "WAIT") // and the workers' own, when they record theirs
	assert.True(t, strings.HasSuffix(p.longest, "s"), "LONGEST %q", p.longest)
	assert.True(t, p.acqSet && p.acq > 0, "ACQ/S of a contended lock:\n%s", frame)
	assert.True(t, p.handSet && p.hand > 0, "HAND/S of a lock with waiters:\n%s", frame)
	// Over its interval top counts no more than were taken while it ran
	// (give or take the holds at the interval's ends).
	assert.LessOrEqual(t, p.acq*0.5, float64(during+2), "ACQ/S against the %d acquisitions made while top ran:\n%s", during, frame)
	assert.LessOrEqual(t, p.hand, p.acq+4, "HAND/S above ACQ/S:\n%s", frame)
	fe, ok := topLineOf(t, frame, fenced)
	require.True(t, ok, "no line for %s:\n%s", fenced, frame)
	assert.True(t, fe.acqSet && fe.acq > 0, "ACQ/S of a contended fenced lock:\n%s", frame)
	fa, ok := topLineOf(t, frame, fair)
	require.True(t, ok, "no line for %s:\n%s", fair, frame)
	assert.True(t, fa.acqSet && fa.acq > 0, "ACQ/S of a contended fair lock:\n%s", frame)
	assert.True(t, fa.handSet && fa.hand > 0, "HAND/S of a contended fair lock:\n%s", frame)
	_, ok = topLineOf(t, frame, idle)
	assert.False(t, ok, "a lock held by one owner that nobody waits for is shown:\n%s", frame)
}

// TestTopRepeats: on a stdout that is not a terminal, top without --once
// prints a frame after each interval until interrupted, and exits 0.
func TestTopRepeats(t *testing.T) {
	c := relocktest.Client(t)
	names, match := testNames(t, 1)
	require.NoError(t, c.GetLock(names[0]).Lock(rlock.WithOwner(t.Context(), "h")))
	recordWait(t, "", c.ID(), "w", names[0], "lock", time.Second)

	p := startRelock(t, "top", "--interval", "50ms", "--redis", server(t).Addr, "--match", match)
	waitUntil(t, 15*time.Second, "two frames", func() (bool, error) {
		out, _ := p.output()
		return strings.Count(out, "NAME ") >= 2, nil
	}, p.describe)
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitOK)
	assert.NotContains(t, r.stdout, "\x1b", "escape codes on a stdout that is not a terminal")
	l, ok := topLineOf(t, r.stdout, names[0])
	require.True(t, ok, r.stdout)
	assert.Equal(t, 1, l.wait)
}
