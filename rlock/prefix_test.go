package rlock_test

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

// prefixKind is one kind a Client hands out, seen through two calls:
// claim takes the only unit of name (the lock, the one permit, the latch's
// count, the rate's one grant), and take tries to take it too, without
// waiting, reporting whether it could. A take that fails on a name that
// another Client claimed shows the two share its keys.
type prefixKind struct {
	claim func(ctx context.Context, c *rlock.Client, name string) error
	take  func(ctx context.Context, c *rlock.Client, name string) (bool, error)
	// named is the handle, for its Name.
	named func(c *rlock.Client, name string) interface{ Name() string }
}

func tryLock(ctx context.Context, l interface {
	TryLock(context.Context, time.Duration, time.Duration) (bool, error)
}) (bool, error) {
	return l.TryLock(ctx, 0, time.Minute)
}

func claimed(ok bool, err error) error {
	if err == nil && !ok {
		return assert.AnError
	}
	return err
}

// prefixKinds has every Get* method of Client (TestPrefixKindsComplete
// checks that none is missing).
var prefixKinds = map[string]prefixKind{
	"GetSpinLock": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			return claimed(tryLock(ctx, c.GetSpinLock(n)))
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			return tryLock(ctx, c.GetSpinLock(n))
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetSpinLock(n) },
	},
	"GetLock": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error { return claimed(tryLock(ctx, c.GetLock(n))) },
		take:  func(ctx context.Context, c *rlock.Client, n string) (bool, error) { return tryLock(ctx, c.GetLock(n)) },
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetLock(n) },
	},
	"GetFencedLock": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			return claimed(tryLock(ctx, c.GetFencedLock(n)))
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			_, ok, err := c.GetFencedLock(n).TryLockAndGetToken(ctx, 0, time.Minute)
			return ok, err
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetFencedLock(n) },
	},
	"GetFairLock": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			return claimed(tryLock(ctx, c.GetFairLock(n)))
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			return tryLock(ctx, c.GetFairLock(n))
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetFairLock(n) },
	},
	"GetReadWriteLock": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			return claimed(tryLock(ctx, c.GetReadWriteLock(n).WriteLock()))
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			return tryLock(ctx, c.GetReadWriteLock(n).WriteLock())
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetReadWriteLock(n) },
	},
	"GetSemaphore": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			s := c.GetSemaphore(n)
			if _, err := s.TrySetPermits(ctx, 1); err != nil {
				return err
			}
			_, ok, err := s.TryAcquire(ctx, 0, time.Minute)
			return claimed(ok, err)
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			s := c.GetSemaphore(n)
			if _, err := s.TrySetPermits(ctx, 1); err != nil {
				return false, err
			}
			_, ok, err := s.TryAcquire(ctx, 0, time.Minute)
			return ok, err
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetSemaphore(n) },
	},
	"GetCountingSemaphore": {
		// claim leaves the count at -1; take adds a permit and takes it,
		// which a count left at -1 refuses, and when it took it leaves
		// the count at -1 too.
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			return c.GetCountingSemaphore(n).AddPermits(ctx, -1)
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			s := c.GetCountingSemaphore(n)
			if err := s.AddPermits(ctx, 1); err != nil {
				return false, err
			}
			ok, err := s.TryAcquire(ctx, 1, 0)
			if ok && err == nil {
				err = s.AddPermits(ctx, -1)
			}
			return ok, err
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetCountingSemaphore(n) },
	},
	"GetCountDownLatch": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			return claimed(c.GetCountDownLatch(n).TrySetCount(ctx, 1))
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			return c.GetCountDownLatch(n).TrySetCount(ctx, 1)
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetCountDownLatch(n) },
	},
	"GetRateLimiter": {
		claim: func(ctx context.Context, c *rlock.Client, n string) error {
			l := c.GetRateLimiter(n)
			if _, err := l.TrySetRate(ctx, 1, time.Minute); err != nil {
				return err
			}
			return claimed(l.TryAcquire(ctx, 1, 0))
		},
		take: func(ctx context.Context, c *rlock.Client, n string) (bool, error) {
			l := c.GetRateLimiter(n)
			if _, err := l.TrySetRate(ctx, 1, time.Minute); err != nil {
				return false, err
			}
			return l.TryAcquire(ctx, 1, 0)
		},
		named: func(c *rlock.Client, n string) interface{ Name() string } { return c.GetRateLimiter(n) },
	},
}

// TestPrefixKindsComplete: every Get* method of Client is in prefixKinds,
// so a new kind is tested under a key prefix as the others are.
func TestPrefixKindsComplete(t *testing.T) {
	typ := reflect.TypeOf(&rlock.Client{})
	for i := range typ.NumMethod() {
		if m := typ.Method(i).Name; strings.HasPrefix(m, "Get") {
			assert.Contains(t, prefixKinds, m, "Client.%s is missing from prefixKinds", m)
		}
	}
}

// prefixName returns a fresh name and deletes, when t ends, its keys under
// each prefix.
func prefixName(t *testing.T, prefixes ...string) string {
	t.Helper()
	name := relocktest.Name(t)
	srv := redistest.Shared(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, p := range prefixes {
			_, _ = srv.Do(ctx, append([]string{"DEL"}, relocktest.Keys(p+name)...)...)
		}
	})
	return name
}

// TestKeyPrefix: for every kind, Clients with the prefixes "app1:" and
// "app2:" never meet on one name, while a Client without a prefix that
// uses the name "app1:<name>" (what a Java service whose NameMapper
// prepends "app1:" does) shares it with the "app1:" Client, both ways;
// each handle's Name is the name as given; and every key the prefixed
// Clients wrote starts with the name under its prefix.
func TestKeyPrefix(t *testing.T) {
	app1 := relocktest.Client(t, rlock.WithKeyPrefix("app1:"))
	app2 := relocktest.Client(t, rlock.WithKeyPrefix("app2:"))
	raw := relocktest.Client(t)
	rdb := relocktest.Raw(t)
	for method, k := range prefixKinds {
		t.Run(method, func(t *testing.T) {
			ctx := t.Context()
			n := prefixName(t, "app1:", "app2:")
			assert.Equal(t, n, k.named(app1, n).Name(), "Name is the name given, without the prefix")

			require.NoError(t, k.claim(ctx, app1, n), "app1 claims %q", n)
			ok, err := k.take(ctx, app2, n)
			require.NoError(t, err)
			assert.True(t, ok, "app2's %q is not app1's", n)
			ok, err = k.take(ctx, raw, "app1:"+n)
			require.NoError(t, err)
			assert.False(t, ok, "the unprefixed name app1:%s is app1's %q", n, n)
			ok, err = k.take(ctx, raw, "app2:"+n)
			require.NoError(t, err)
			assert.False(t, ok, "the unprefixed name app2:%s is app2's %q", n, n)
			ok, err = k.take(ctx, raw, n)
			require.NoError(t, err)
			assert.True(t, ok, "the unprefixed name %q is neither app1's nor app2's", n)

			// The other way: what the unprefixed Client claims first,
			// the prefixed one finds taken.
			m := prefixName(t, "app1:")
			require.NoError(t, k.claim(ctx, raw, "app1:"+m))
			ok, err = k.take(ctx, app1, m)
			require.NoError(t, err)
			assert.False(t, ok, "app1's %q is the unprefixed app1:%s", m, m)

			// The keys: with only app1's claim on a fresh name, every
			// key that names it is one of the keys derived from
			// app1:<name>, its own key among them.
			f := prefixName(t, "app1:")
			require.NoError(t, k.claim(ctx, app1, f))
			keys, err := rdb.Do(ctx, rdb.B().Keys().Pattern("*"+f+"*").Build()).AsStrSlice()
			require.NoError(t, err)
			assert.Contains(t, keys, "app1:"+f, "the name's own key is the name under the prefix")
			derived := relocktest.Keys("app1:" + f)
			for _, key := range keys {
				assert.Contains(t, derived, key, "a key of app1's %q is derived from app1:%s", f, f)
			}
		})
	}
}

// TestKeyPrefixWakesAcrossMappers: a Client with the prefix "app1:"
// waiting for a lock that an unprefixed Client holds as "app1:<name>" is
// woken by its release (they share the lock's channel): it goes on long
// before the holder's lease would have run out.
func TestKeyPrefixWakesAcrossMappers(t *testing.T) {
	app1 := relocktest.Client(t, rlock.WithKeyPrefix("app1:"))
	raw := relocktest.Client(t)
	n := prefixName(t, "app1:")
	holder := raw.GetLock("app1:" + n)
	require.NoError(t, holder.LockLease(t.Context(), time.Hour))
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		close(started)
		ok, err := app1.GetLock(n).TryLock(t.Context(), time.Minute, time.Minute)
		if err == nil && !ok {
			err = assert.AnError
		}
		done <- err
	}()
	<-started
	rdb := relocktest.Raw(t)
	relocktest.Eventually(t, 10*time.Second, "the waiter's subscription", func() bool {
		return relocktest.Subscribers(rdb, "redisson_lock__channel:{app1:"+n+"}") > 0
	})
	require.NoError(t, holder.Unlock(t.Context()))
	require.NoError(t, relocktest.Receive(t, done, 10*time.Second, "the prefixed waiter's acquisition"))
}

// TestKeyPrefixLostHandlerName: the lost handler of a prefixed Client is
// given the name as the Client was (without the prefix); the error and
// the lock in Redis name it with the prefix.
func TestKeyPrefixLostHandlerName(t *testing.T) {
	lost := make(chan string, 1)
	c := relocktest.Client(t, rlock.WithKeyPrefix("app1:"), rlock.WithLostHandler(func(name, _ string, _ error) {
		lost <- name
	}))
	n := prefixName(t, "app1:")
	l := c.GetLock(n)
	require.NoError(t, l.Lock(t.Context()))
	assert.Len(t, relocktest.HGetAll(t, relocktest.Raw(t), "app1:"+n), 1, "the hold is in the hash app1:<name>")
	ok, err := l.ForceUnlock(t.Context())
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, n, relocktest.Receive(t, lost, 10*time.Second, "the lost handler"))
	err = l.Unlock(t.Context())
	require.ErrorIs(t, err, rlock.ErrNotHeld)
	assert.Contains(t, err.Error(), `"app1:`+n+`"`, "errors name the lock as it is in Redis")
}

// TestKeyPrefixInvalid: a prefix with a control character is refused by
// NewClient and New; a prefix that makes a name invalid (braces that no
// longer form a hash tag) is reported by the handle, and nothing is
// written; an empty prefix is no prefix; braces may span the two.
func TestKeyPrefixInvalid(t *testing.T) {
	srv := redistest.Shared(t)
	_, err := rlock.NewClient(srv.ClientOption(), rlock.WithKeyPrefix("app\n1:"))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rlock.New(relocktest.Raw(t), rlock.WithKeyPrefix("app\x001:"))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	_, err = rlock.NewClient(srv.ClientOption(), rlock.WithKeyPrefix(strings.Repeat("p", 1024)))
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)

	open := relocktest.Client(t, rlock.WithKeyPrefix("{"))
	n := prefixName(t, "{")
	_, err = open.GetLock(n).TryLock(t.Context(), 0, time.Minute)
	require.ErrorIs(t, err, rlock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), `"{`+n+`"`)
	exists, err := relocktest.Raw(t).Do(t.Context(), relocktest.Raw(t).B().Exists().Key("{"+n).Build()).AsInt64()
	require.NoError(t, err)
	assert.Zero(t, exists, "a refused name writes nothing")
	ok, err := open.GetLock(n+"}").TryLock(t.Context(), 0, time.Minute)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Len(t, relocktest.HGetAll(t, relocktest.Raw(t), "{"+n+"}"), 1, "the prefix and the name form the hash tag {<name>}")
	t.Cleanup(func() { _, _ = srv.Do(context.Background(), "DEL", "{"+n+"}", "redisson_lock__channel:{"+n+"}") })

	none := relocktest.Client(t, rlock.WithKeyPrefix(""))
	m := relocktest.Name(t)
	require.NoError(t, none.GetLock(m).LockLease(t.Context(), time.Minute))
	assert.Len(t, relocktest.HGetAll(t, relocktest.Raw(t), m), 1, "an empty prefix is no prefix")
}
