package relocktest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/rlock"
)

// Latency is a rueidis.Client whose commands (Do, DoMulti) reach the
// server Each after they are sent, and whose replies come back Each after
// the server gave them: a network between Client and server, without a
// proxy. A context that ends before a command has reached the server
// keeps it from running; one that ends on the way back loses its reply
// (the command ran), as with a real network. Pub/sub (Receive, Dedicate)
// is not delayed. Commands sent at once from several goroutines may reach
// the server in any order.
type Latency struct {
	rueidis.Client
	Each time.Duration
}

// NewLatency wraps rdb with each of latency each way.
func NewLatency(rdb rueidis.Client, each time.Duration) *Latency {
	return &Latency{Client: rdb, Each: each}
}

// travel is one way: it returns ctx's error if ctx ends first.
func (l *Latency) travel(ctx context.Context) error {
	if l.Each <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(l.Each)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Do sends cmd after Each and returns its reply Each after it came.
func (l *Latency) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	if err := l.travel(ctx); err != nil {
		return rueidis.NewErrorResult(err)
	}
	res := l.Client.Do(ctx, cmd)
	if err := l.travel(ctx); err != nil {
		return rueidis.NewErrorResult(err)
	}
	return res
}

// DoMulti sends cmds after Each and returns their replies Each after they
// came.
func (l *Latency) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	fail := func(err error) []rueidis.RedisResult {
		out := make([]rueidis.RedisResult, len(cmds))
		for i := range out {
			out[i] = rueidis.NewErrorResult(err)
		}
		return out
	}
	if err := l.travel(ctx); err != nil {
		return fail(err)
	}
	res := l.Client.DoMulti(ctx, cmds...)
	if err := l.travel(ctx); err != nil {
		return fail(err)
	}
	return res
}

// SlowClient returns a Client on the package's shared redis-server whose
// commands and replies each take each longer to arrive (see Latency),
// closed when t ends: SlowClientOn the shared server.
func SlowClient(t testing.TB, each time.Duration, wrap func(rueidis.Client) rueidis.Client, opts ...rlock.Option) *rlock.Client {
	t.Helper()
	return SlowClientOn(t, redistest.Shared(t), each, wrap, opts...)
}

// SlowClientOn returns a Client on srv whose commands and replies each
// take each longer to arrive (see Latency), closed when t ends. Its
// rueidis client pipelines on one connection, as NewClient's does. wrap,
// if not nil, wraps the delayed client (a Tap there sees each command as
// it is sent, before the delay).
func SlowClientOn(t testing.TB, srv *redistest.Server, each time.Duration, wrap func(rueidis.Client) rueidis.Client,
	opts ...rlock.Option) *rlock.Client {
	t.Helper()
	opt := srv.ClientOption()
	opt.PipelineMultiplex = -1
	rdb, err := rueidis.NewClient(opt)
	require.NoError(t, err, "relocktest: rueidis client")
	t.Cleanup(rdb.Close)
	var slow rueidis.Client = NewLatency(rdb, each)
	if wrap != nil {
		slow = wrap(slow)
	}
	c, err := rlock.New(slow, opts...)
	require.NoError(t, err, "relocktest: New")
	t.Cleanup(func() { _ = c.Close() })
	return c
}
