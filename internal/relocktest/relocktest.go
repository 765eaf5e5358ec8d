// Package relocktest has test helpers built on real redis-server processes:
// Clients on the test package's shared server and unique lock names that
// are cleaned up after each test.
package relocktest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// Client returns a Client on the package's shared redis-server, closed
// when t ends.
func Client(t testing.TB, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	return ClientOn(t, redistest.Shared(t), opts...)
}

// ClientOn returns a Client on srv, closed when t ends.
func ClientOn(t testing.TB, srv *redistest.Server, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	c, err := rlock.NewClient(srv.ClientOption(), opts...)
	require.NoError(t, err, "relocktest: NewClient")
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Raw returns a raw rueidis client on the package's shared server, for
// looking at what the locks wrote.
func Raw(t testing.TB) rueidis.Client {
	t.Helper()
	return redistest.Shared(t).Client(t)
}

var seq atomic.Uint64

// Name returns a lock name unique to this call, and deletes the lock's keys
// on the shared server when t ends.
func Name(t testing.TB) string {
	t.Helper()
	base := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	name := fmt.Sprintf("relock-test:%s:%d", base, seq.Add(1))
	srv := redistest.Shared(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = srv.Do(ctx, append([]string{"DEL"}, Keys(name)...)...)
	})
	return name
}

// Keys are the keys a lock, semaphore or latch named name may write (not
// the lease keys of read holds, which expire by themselves).
func Keys(name string) []string {
	var keys []string
	for _, k := range layout.KeysOf(name) {
		if !slices.Contains(keys, k.Name) { // the name's own key is a lock's hash or a count
			keys = append(keys, k.Name)
		}
	}
	return keys
}

// HGetAll returns the lock hash of name on the shared server.
func HGetAll(t testing.TB, rdb rueidis.Client, name string) map[string]string {
	t.Helper()
	m, err := rdb.Do(t.Context(), rdb.B().Hgetall().Key(name).Build()).AsStrMap()
	require.NoError(t, err, "HGETALL %s", name)
	return m
}

// DBSize returns the number of keys on the server of rdb.
func DBSize(t testing.TB, rdb rueidis.Client) int64 {
	t.Helper()
	n, err := rdb.Do(t.Context(), rdb.B().Dbsize().Build()).AsInt64()
	require.NoError(t, err, "DBSIZE")
	return n
}

// Eventually polls cond every few milliseconds until it holds, and fails
// t with "timed out after <timeout> waiting for <what>" when timeout passes
// first. It is the one way the tests wait for an event that sends no
// notification (a key that expires, a subscription the server counts); it
// never stands in for a sleep, and an event that has a channel or a reply
// is waited for on that.
//
// cond only answers whether the event happened. It must never call
// t.Fatal, t.Error, require or assert, nor a helper that does (HGetAll,
// DBSize, KillConnections): a failure inside it would report a read error
// in place of what the test waited for, and a condition is a function that
// can run where failing t is wrong (testify's Eventually runs it on a
// goroutine of its own, and may run it once more after the test gave up).
// A condition that cannot read the state answers false, not yet (as
// Subscribers returns -1), and the timeout's message then says what did not
// happen. A condition returns promptly: a Redis call in it that may meet a
// paused or dead server has a deadline of its own. Call Eventually from the
// test's own goroutine.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.FailNowf(t, "timed out", "timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond) // the poll interval
	}
}

// Receive waits up to timeout for a value from ch (or for ch to close) and
// returns it; it fails t with "timed out after <timeout> waiting for
// <what>" when nothing comes. It bounds a test's wait for an event that
// arrives on a channel, so that a missing event fails the test with a
// message instead of blocking until go test's -timeout. Call it from the
// test's own goroutine.
func Receive[T any](t testing.TB, ch <-chan T, timeout time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		require.FailNowf(t, "timed out", "timed out after %v waiting for %s", timeout, what)
		var zero T
		return zero
	}
}

// Subscribers returns how many connections subscribe to channel on the
// server of rdb (PUBSUB NUMSUB), or -1 when the server does not answer:
// for conditions of Eventually, which must not fail the test themselves.
// It waits at most a second for the answer.
func Subscribers(rdb rueidis.Client, channel string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	vals, err := rdb.Do(ctx, rdb.B().PubsubNumsub().Channel(channel).Build()).ToArray()
	if err != nil || len(vals) != 2 {
		return -1
	}
	n, err := vals[1].AsInt64()
	if err != nil {
		return -1
	}
	return n
}

// KillConnections closes, on the server of raw, every connection whose
// client name is name (rueidis.ClientOption.ClientName), as the end of a
// killed process closes them. It returns how many it closed.
func KillConnections(t testing.TB, raw rueidis.Client, name string) int {
	t.Helper()
	list, err := raw.Do(t.Context(), raw.B().ClientList().Build()).ToString()
	require.NoError(t, err, "CLIENT LIST")
	// Under RESP3 the list is a verbatim string: its text comes after a
	// "txt:" format, which would otherwise hide the first client's ID.
	list = strings.TrimPrefix(list, "txt:")
	n := 0
	for _, line := range strings.Split(list, "\n") {
		fields := strings.Fields(line)
		var id int64 = -1
		named := false
		for _, f := range fields {
			k, v, _ := strings.Cut(f, "=")
			switch {
			case k == "id":
				if n, err := strconv.ParseInt(v, 10, 64); err == nil {
					id = n
				}
			case k == "name" && v == name:
				named = true
			}
		}
		if named && id >= 0 {
			if err := raw.Do(t.Context(), raw.B().ClientKill().Id(id).Build()).Error(); err == nil {
				n++
			}
		}
	}
	return n
}

// NamePair returns a fresh name without braces (Name) and its other form,
// the same name in braces: the two derive the same keys. The braced
// form's own key is deleted when t ends (Name's cleanup deletes the
// rest).
func NamePair(t testing.TB) (plain, braced string) {
	t.Helper()
	plain = Name(t)
	braced = "{" + plain + "}"
	srv := redistest.Shared(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = srv.Do(ctx, "DEL", braced)
	})
	return plain, braced
}
