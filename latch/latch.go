package latch

import (
	"context"
	"fmt"
	"github.com/relock-go/relock/internal/layout"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock"
	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/observe"
	"github.com/relock-go/relock/pubsub"
)

// The errors of every kind of relock (the values of package relock).
var (
	ErrNotAcquired     = relock.ErrNotAcquired
	ErrClosed          = relock.ErrClosed
	ErrInvalidArgument = relock.ErrInvalidArgument
)

// CountDownLatch is a handle on a count-down latch: a count set once,
// counted down by any process, that lets every waiter go on when it
// reaches 0. Get one with rlock.Client.GetCountDownLatch. Handles are
// cheap and safe for concurrent use.
type CountDownLatch struct {
	core *lockcore.Core
	name string
}

func init() {
	lockcore.Provide(func(c *lockcore.Core, name string) *CountDownLatch { return &CountDownLatch{core: c, name: name} })
	// "0", the opening, lets every waiter go on; "1" (a count set) wakes
	// nobody.
	lockcore.RegisterWakePolicy(layout.CountDownLatchChannelPrefix, func(payload string) pubsub.Wake {
		if payload == openMessage {
			return pubsub.WakeAll
		}
		return pubsub.Ignore
	})
}

// openMessage is published when the count reaches 0.
const openMessage = "0"

// openedTTL is how long relock's mark of an opening lasts (see
// layout.LatchOpened): far longer than a waiter takes to subscribe and
// read again, on a Client that must first make its pub/sub connection.
const openedTTL = 10 * time.Second

// Name is the latch's name as it was given to the Client. The key of its
// count is that name after the Client's key prefix (rlock.WithKeyPrefix;
// none by default).
func (l *CountDownLatch) Name() string { return l.core.Unmap(l.name) }

// Channel is the channel of the latch name. Redisson names it
// "redisson_countdownlatch__channel__{" + name + "}" whatever the name
// holds, so for a name with a hash tag of its own it is not in the
// name's cluster slot.
func Channel(name string) string { return layout.LatchChannel(name) }

func (l *CountDownLatch) check() error {
	if err := l.core.CheckOpen(); err != nil {
		return err
	}
	if err := lockcore.CheckName(l.name); err != nil {
		return err
	}
	if l.core.PublishCommand() == "spublish" && strings.ContainsAny(l.name, "{}") {
		// SPUBLISH from a script must stay in the script's slot.
		return fmt.Errorf("%w: latch name %q: with sharded pub/sub a latch name may not contain braces (its channel would be in another cluster slot)",
			ErrInvalidArgument, l.name)
	}
	return nil
}

// fail wraps a Redis error with what was being done (a script's refusal
// of the name becomes ErrNameConflict); after Close it also matches
// ErrClosed.
func (l *CountDownLatch) fail(op string, err error) error {
	err = lockcore.ScriptError(layout.KindLatch, op, l.name, err)
	if l.core.CheckOpen() != nil {
		err = lockcore.Join(err, ErrClosed)
	}
	return err
}

// TrySetCount sets the count to n (at least 1) if the latch has none (a
// latch that reached 0 has none), and reports whether it did. Setting a
// count where there was none writes relock's mark of an opening: the
// latch was open until then, which a waiter that read a count before must
// not miss (see the package documentation).
func (l *CountDownLatch) TrySetCount(ctx context.Context, n int) (bool, error) {
	if err := l.check(); err != nil {
		return false, err
	}
	if n < 1 {
		return false, fmt.Errorf("%w: latch count %d is under 1", ErrInvalidArgument, n)
	}
	ok, err := lua.LatchSet.Exec(ctx, l.core.RDB, []string{l.name, layout.OtherKey(l.name), layout.LatchOpened(l.name)},
		[]string{fmt.Sprint(n), Channel(l.name), l.core.PublishCommand(), fmt.Sprint(openedTTL.Milliseconds())}).AsInt64()
	if err != nil {
		return false, l.fail("set count", err)
	}
	return ok == 1, nil
}

// CountDown counts the latch down by one; at 0 the latch opens and every
// waiter, in every process, goes on (relock's waiters also by the mark
// the opening leaves, see the package documentation). A latch with no
// count stays so. The
// call is not resent: when it returns a connection error, the count may
// or may not have gone down.
func (l *CountDownLatch) CountDown(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	err := lua.LatchCountDown.Exec(ctx, l.core.RDB, []string{l.name, layout.LatchOpened(l.name)},
		[]string{Channel(l.name), l.core.PublishCommand(), fmt.Sprint(openedTTL.Milliseconds())}).Error()
	if err != nil {
		return l.fail("count down", err)
	}
	return nil
}

// Count is the latch's count: 0 when it is open (or was never set).
func (l *CountDownLatch) Count(ctx context.Context) (int, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	return l.count(ctx)
}

func (l *CountDownLatch) count(ctx context.Context) (int, error) {
	return l.countOf(l.core.RDB.Do(ctx, l.core.RDB.B().Get().Key(l.name).Build()))
}

// countOf is the count in the reply to a GET of the latch's key.
func (l *CountDownLatch) countOf(res rueidis.RedisResult) (int, error) {
	n, err := res.AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0, nil
	}
	if err != nil {
		return 0, l.fail("count", err)
	}
	return int(max(n, 0)), nil
}

// look reads, in one round trip, relock's mark of the last opening ("" when
// there is none) and then the count: an opening that comes after the mark
// was read changes the mark, even when it comes before the count is read.
func (l *CountDownLatch) look(ctx context.Context) (opened string, n int, err error) {
	b := l.core.RDB.B()
	res := l.core.RDB.DoMulti(ctx, b.Get().Key(layout.LatchOpened(l.name)).Build(), b.Get().Key(l.name).Build())
	opened, err = res[0].ToString()
	if rueidis.IsRedisNil(err) {
		opened, err = "", nil
	}
	if err != nil {
		return "", 0, l.fail("count", err)
	}
	n, err = l.countOf(res[1])
	return opened, n, err
}

// Await waits until the count is 0 or ctx ends. It reads the count and
// returns at 0 (one round trip, no subscription); otherwise it sleeps on
// the latch's channel (one subscription per name per Client, shared by all
// its waiters) and never polls: it reads once more when subscribed, and
// after that the message that the count reached 0 lets it go on, even when
// a new count was set since (the next batch must not keep a waiter of the
// last one waiting). A lost subscription connection makes it read again
// once it is subscribed anew. Each read also reads relock's mark of the
// last opening (see the package documentation): when it changed since the
// first read, the latch opened in between and Await returns, even if a new
// count is set. So an opening after the first read is missed only when its
// message did not reach the waiter (it came before the subscription was in
// place, on a Client's first subscription after making its pub/sub
// connection, or while the subscription connection was down, or just
// before it was lost), a new count was set before the waiter's next read,
// and no mark tells of it: the opening and the new count were both made
// by something other than relock (Redisson's countDown or delete, then its
// trySetCount), or that read came more than 10s after the mark was
// written. The waiter then waits for the next opening. When ctx ends
// first, the error matches both ErrNotAcquired and ctx.Err(); when Close
// does, ErrNotAcquired and ErrClosed. It rides out a dropped connection or
// a failover, reading again every 100ms until Redis answers or ctx ends.
func (l *CountDownLatch) Await(ctx context.Context) error {
	if err := l.check(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return lockcore.NotAcquired(err)
	}
	_, err := l.core.Wait(&lockcore.Wait{Ctx: ctx, Limit: lockcore.NoLimit, OnMessage: true,
		Lock: observe.Lock{Kind: "latch", Name: l.name}}, &awaiter{l: l})
	return err
}

// awaiter is one call of Await: the latch's Waiter.
type awaiter struct {
	l *CountDownLatch
	// looked: a read found a count; opened is the mark it found with it.
	looked bool
	opened string
}

// Attempt reads the mark and the count: the wait is over at 0, or when
// the mark changed since the first read that found a count (the latch
// opened in between, and a new count was set since).
func (a *awaiter) Attempt(w *lockcore.Wait) (lockcore.Outcome, error) {
	if err := w.Over(); err != nil {
		return lockcore.Outcome{}, err
	}
	opened, n, err := a.l.look(w.Call())
	switch {
	case err != nil:
		return lockcore.Outcome{}, err
	case n == 0:
		return lockcore.Outcome{Done: true}, nil
	case !a.looked:
		a.looked, a.opened = true, opened
		return lockcore.Outcome{}, nil
	}
	return lockcore.Outcome{Done: opened != "" && opened != a.opened}, nil
}

// WaitChannel is the latch's channel.
func (a *awaiter) WaitChannel() string { return Channel(a.l.name) }

// End has nothing to undo.
func (*awaiter) End(*lockcore.Wait, bool) {}
