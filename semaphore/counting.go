package semaphore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
)

// GrantMemory is how long a counting semaphore remembers a grant (see
// Counting): an acquisition whose reply was lost and that is resent, or
// given back, within it takes nothing twice and leaves nothing taken.
const GrantMemory = 10 * time.Second

// Counting is a handle on a counting semaphore in the layout of
// Redisson's RSemaphore: a count of permits under the name, without
// permit IDs or leases. Any process takes permits with Acquire and gives
// permits back with Release, its own or not; Java's getSemaphore(name)
// shares the count. Get one with rlock.Client.GetCountingSemaphore.
// Handles are cheap and safe for concurrent use.
//
// Permits have no lease: a process that dies holding permits never gives
// them back. Where that matters, use Semaphore (permits on a lease).
type Counting struct {
	core *lockcore.Core
	name string
}

func init() {
	// Its channel is the semaphore channel: Semaphore's wake policy
	// serves both (one waiter of each Client per message, passed on).
	lockcore.Provide(func(c *lockcore.Core, name string) *Counting { return &Counting{core: c, name: name} })
}

// Name is the counting semaphore's name as it was given to the Client.
// The key of its count is that name after the Client's key prefix
// (rlock.WithKeyPrefix; none by default).
func (s *Counting) Name() string { return s.core.Unmap(s.name) }

func (s *Counting) check() error {
	if err := s.core.CheckOpen(); err != nil {
		return err
	}
	return lockcore.CheckName(s.name)
}

// fail wraps a Redis error with what was being done (a script's refusal
// of the name becomes relock.ErrNameConflict); after Close it also
// matches ErrClosed.
func (s *Counting) fail(op string, err error) error {
	err = lockcore.ScriptError(layout.KindCountingSemaphore, op, s.name, err)
	if s.core.CheckOpen() != nil {
		err = lockcore.Join(err, ErrClosed)
	}
	return err
}

// checkPermits refuses a number of permits under 1.
func checkPermits(n int) error {
	if n < 1 {
		return fmt.Errorf("%w: %d permits (at least 1)", ErrInvalidArgument, n)
	}
	return nil
}

// TrySetPermits sets the count to n (at least 0) if it was never set, and
// reports whether it did; a count set wakes the waiters.
func (s *Counting) TrySetPermits(ctx context.Context, n int) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if n < 0 {
		return false, fmt.Errorf("%w: negative permits %d", ErrInvalidArgument, n)
	}
	k := layout.CountingSemaphore(s.name)
	ok, err := lua.SemSet.Exec(ctx, s.core.RDB, []string{k.Count, k.Channel, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand(), strconv.Itoa(n)}).AsInt64()
	if err != nil {
		return false, s.fail("set permits", err)
	}
	return ok == 1, nil
}

// AddPermits adds n permits to the count (n < 0 takes -n away; the count
// may then go below 0, and no permit is handed out until enough come
// back). Permits added wake the waiters. n == 0 does nothing. The call is
// not resent: when it returns a connection error, the permits may or may
// not have been added.
func (s *Counting) AddPermits(ctx context.Context, n int) error {
	if err := s.check(); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	if _, err := s.add(ctx, n); err != nil {
		return s.fail("add permits", err)
	}
	return nil
}

func (s *Counting) add(ctx context.Context, n int) (int64, error) {
	k := layout.CountingSemaphore(s.name)
	return s.core.RunRelease(ctx, lua.CountingAdd, []string{k.Count, k.Channel, layout.OtherKey(s.name)},
		[]string{s.core.PublishCommand(), strconv.Itoa(n)}).AsInt64()
}

// Acquire takes n permits (at least 1), all at once, waiting until n are
// available or ctx ends. If Acquire returns an error, it took no permit;
// when ctx ended the wait, the error matches both ErrNotAcquired and
// ctx.Err(); when Close did, ErrNotAcquired and ErrClosed.
func (s *Counting) Acquire(ctx context.Context, n int) error {
	if err := checkPermits(n); err != nil {
		return err
	}
	_, err := s.acquire(ctx, n, lockcore.NoLimit)
	return err
}

// TryAcquire takes n permits like Acquire but gives up after wait: wait 0
// makes one attempt. It returns (false, nil) when the wait ended without
// the permits while ctx is live, and (false, err) for errors, a context
// that ended among them.
func (s *Counting) TryAcquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if err := checkPermits(n); err != nil {
		return false, err
	}
	if err := lockcore.CheckWait(wait); err != nil {
		return false, err
	}
	return s.acquire(ctx, n, wait)
}

// acquire is one waiting call through the Client's wait loop.
func (s *Counting) acquire(ctx context.Context, n int, wait time.Duration) (bool, error) {
	if err := s.check(); err != nil {
		return false, err
	}
	if err := ctx.Err(); err != nil {
		return false, lockcore.NotAcquired(err)
	}
	_, id := newID()
	a := &countingAcquire{s: s, n: n, grant: id + ":" + strconv.Itoa(n)}
	return s.core.Wait(&lockcore.Wait{Ctx: ctx, Limit: wait, Acquire: true, Owner: id,
		Lock: observe.Lock{Kind: observe.KindCountingSemaphore, Name: s.name}}, a)
}

// Release gives n permits (at least 1) back, whoever took them, and wakes
// the waiters. It runs on a context detached from ctx, so it works when
// ctx has ended. It is not resent: when it returns a connection error,
// the permits may or may not be back.
func (s *Counting) Release(ctx context.Context, n int) error {
	if err := s.check(); err != nil {
		return err
	}
	if err := checkPermits(n); err != nil {
		return err
	}
	dctx, cancel := detached(ctx)
	defer cancel()
	return s.core.ObserveRelease(dctx, observe.Lock{Kind: observe.KindCountingSemaphore, Name: s.name}, "",
		func(ctx context.Context) error {
			if _, err := s.add(ctx, n); err != nil {
				return s.fail("release", err)
			}
			return nil
		})
}

// AvailablePermits is the count: the permits available now (below 0
// when more were taken away than were available), 0 when it was never
// set.
func (s *Counting) AvailablePermits(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	n, err := s.core.RDB.Do(ctx, s.core.RDB.B().Get().Key(s.name).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, s.fail("available permits", err)
	}
	return int(n), nil
}

// DrainPermits takes every permit available and returns how many it took
// (0 when none is: a count at or below 0 is left as it is). It is not
// resent: when it returns a connection error, the permits may have been
// taken.
func (s *Counting) DrainPermits(ctx context.Context) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	n, err := lua.CountingDrain.Exec(ctx, s.core.RDB, []string{s.name, layout.OtherKey(s.name)}, nil).AsInt64()
	if err != nil {
		return 0, s.fail("drain permits", err)
	}
	return int(n), nil
}

// countingAcquire is one call of Acquire or TryAcquire: the counting
// semaphore's Waiter. Every attempt sends the same grant, so a resent
// attempt takes nothing twice.
type countingAcquire struct {
	s       *Counting
	n       int
	grant   string // "<request ID>:<n>"
	unknown bool   // an attempt may have taken the permits unseen
}

// WaitChannel is the semaphore channel.
func (a *countingAcquire) WaitChannel() string { return layout.CountingSemaphore(a.s.name).Channel }

// Attempt runs the acquire script once. Nothing but a message can make
// permits available (every script that gives permits publishes, and they
// have no lease that could end), so a refusal sleeps until a wake-up. A
// refusal while permits are available (too few for this call, perhaps
// enough for another waiter of the Client) passes the wake-up on; so does
// a success that leaves permits available.
func (a *countingAcquire) Attempt(w *lockcore.Wait) (lockcore.Outcome, error) {
	if err := w.Over(); err != nil {
		return lockcore.Outcome{}, err
	}
	k := layout.CountingSemaphore(a.s.name)
	res, unsynced := a.s.core.RunAcquire(w.ScriptContext(), lua.CountingAcquire, []string{k.Count, k.Grants, layout.OtherKey(a.s.name)},
		[]string{strconv.Itoa(a.n), a.grant, strconv.FormatInt(GrantMemory.Milliseconds(), 10)})
	vals, err := res.AsIntSlice()
	if err != nil {
		if !lockcore.IsReply(err) {
			a.unknown = true
		}
		return lockcore.Outcome{}, a.s.fail("acquire", err)
	}
	a.unknown = false
	if len(vals) != 2 {
		return lockcore.Outcome{}, fmt.Errorf("relock: acquire %q: unexpected reply %v", a.s.name, vals)
	}
	if vals[0] != 1 {
		return lockcore.Outcome{PassOn: vals[1] > 0}, nil
	}
	if err := w.Cancelled(); err != nil {
		a.giveBack(w.Ctx)
		return lockcore.Outcome{}, err
	}
	if unsynced != nil {
		a.giveBack(w.Ctx)
		return lockcore.Outcome{}, lockcore.NotAcquired(fmt.Errorf("%q: %w", a.s.name, unsynced))
	}
	return lockcore.Outcome{Done: true, PassOn: vals[1] > 0}, nil
}

// giveBack returns the permits of the call's grant. When Redis does not
// answer, the call's end tries again.
func (a *countingAcquire) giveBack(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	k := layout.CountingSemaphore(a.s.name)
	err := lua.CountingUndo.Exec(ctx, a.s.core.RDB, []string{k.Count, k.Grants, k.Channel},
		[]string{a.s.core.PublishCommand(), a.grant, strconv.Itoa(a.n)}).Error()
	a.unknown = err != nil
}

// End gives back the permits an unanswered attempt of a call that did not
// acquire may have taken.
func (a *countingAcquire) End(w *lockcore.Wait, done bool) {
	if !done && a.unknown {
		a.giveBack(w.Ctx)
	}
}
