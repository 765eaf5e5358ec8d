package multilock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockcore"
)

// journal records the calls made to a set of fake locks, in order.
type journal struct {
	mu    sync.Mutex
	calls []string
}

func (j *journal) add(s string) {
	j.mu.Lock()
	j.calls = append(j.calls, s)
	j.mu.Unlock()
}

func (j *journal) list() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.calls...)
}

// fake is an in-memory reentrant Locker with Done, whose failures the tests
// set: busy (held by someone else), an error from TryLock or Unlock, an
// attempt that hangs until its context ends.
type fake struct {
	name string
	j    *journal

	mu        sync.Mutex
	owner     string
	count     int
	done      chan struct{}
	busy      bool
	tryErr    error
	unlockErr error
	hang      bool
	delay     time.Duration
	freed     chan struct{} // closed and replaced when the lock becomes free
}

func newFake(name string, j *journal) *fake {
	return &fake{name: name, j: j, freed: make(chan struct{})}
}

func fakes(j *journal, names ...string) []*fake {
	fs := make([]*fake, len(names))
	for i, n := range names {
		fs[i] = newFake(n, j)
	}
	return fs
}

func (f *fake) Name() string { return f.name }

func owner(ctx context.Context) string {
	o, _ := lockcore.OwnerFrom(ctx)
	return o
}

func (f *fake) TryLock(ctx context.Context, wait, lease time.Duration) (bool, error) {
	f.j.add("try " + f.name)
	o := owner(ctx)
	if o == "" {
		return false, errors.New("fake: no owner in the context")
	}
	f.mu.Lock()
	hang, delay, tryErr := f.hang, f.delay, f.tryErr
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return false, errors.Join(relock.ErrNotAcquired, ctx.Err())
	}
	if delay > 0 {
		time.Sleep(delay) // the scenario: an attempt that takes this long
	}
	if tryErr != nil {
		return false, tryErr
	}
	var limit <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		limit = t.C
	}
	for {
		f.mu.Lock()
		if !f.busy && (f.count == 0 || f.owner == o) {
			if f.count == 0 {
				f.owner = o
				f.done = make(chan struct{})
			}
			f.count++
			f.mu.Unlock()
			return true, nil
		}
		freed := f.freed
		f.mu.Unlock()
		if wait == 0 {
			return false, nil
		}
		select {
		case <-freed:
		case <-limit:
			return false, nil
		case <-ctx.Done():
			return false, errors.Join(relock.ErrNotAcquired, ctx.Err())
		}
	}
}

func (f *fake) Unlock(ctx context.Context) error {
	f.j.add("unlock " + f.name)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.unlockErr != nil {
		return f.unlockErr
	}
	if f.count == 0 || f.owner != owner(ctx) {
		return fmt.Errorf("%w: fake %s", relock.ErrNotHeld, f.name)
	}
	f.count--
	if f.count == 0 {
		f.endLocked()
	}
	return nil
}

func (f *fake) endLocked() {
	f.owner = ""
	f.count = 0
	close(f.done)
	f.done = nil
	close(f.freed)
	f.freed = make(chan struct{})
}

// Done is closed when the owner's hold ends.
func (f *fake) Done(ctx context.Context) <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count == 0 || f.owner != owner(ctx) {
		c := make(chan struct{})
		close(c)
		return c
	}
	return f.done
}

// lose ends the current hold as an expiry would.
func (f *fake) lose() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.count > 0 {
		f.endLocked()
	}
}

func (f *fake) set(fn func(f *fake)) {
	f.mu.Lock()
	fn(f)
	f.mu.Unlock()
}

func (f *fake) held() (string, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.owner, f.count
}
