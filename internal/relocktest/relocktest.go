// Package relocktest has test helpers built on real redis-server processes:
// Clients on the test package's shared server and unique lock names that
// are cleaned up after each test.
package relocktest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

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
	if err != nil {
		t.Fatalf("relocktest: NewClient: %v", err)
	}
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
	if err != nil {
		t.Fatalf("HGETALL %s: %v", name, err)
	}
	return m
}

// DBSize returns the number of keys on the server of rdb.
func DBSize(t testing.TB, rdb rueidis.Client) int64 {
	t.Helper()
	n, err := rdb.Do(t.Context(), rdb.B().Dbsize().Build()).AsInt64()
	if err != nil {
		t.Fatalf("DBSIZE: %v", err)
	}
	return n
}

// Eventually polls cond every few milliseconds until it holds or timeout
// passes, and fails t then. It waits for an event that has no
// notification; it never stands in for a sleep.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
