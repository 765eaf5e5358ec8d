package lockcore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/lua"
	"github.com/relock-go/relock/watchdog"
)

// Call is one script call: the script, its keys and its arguments.
type Call struct {
	Script *lua.Script
	Keys   []string
	Args   []string
}

// Renewable is what the values given to Core.Watchdog.Add are: each says
// how to renew itself for lease. Its call must reply 0 when what it
// renews is gone (the lease is then lost), and another number (1) when it
// renewed; it must be safe to send twice. One that also has a method
// Replied(n int64) is told each reply (see waitLease).
type Renewable interface {
	RenewCall(lease time.Duration) Call
}

// renew is the watchdog's RenewFunc: each lease's renewal call (see
// Renewable), pipelined in one round trip as EVALSHA (rueidis' ExecMulti
// would send SCRIPT LOAD first every time); a server that lost its
// scripts gets them loaded once per script, through ExecMulti.
func (c *Core) renew(ctx context.Context, leases []*watchdog.Lease) []error {
	// The renewals that a message on their lock's channel brought forward
	// (see hold.heard): they answer it now.
	var heard []int
	for i, l := range leases {
		if r, ok := l.Value().(*renewal); ok && r.h.heard.Swap(false) {
			heard = append(heard, i)
		}
	}
	var errs []error
	if c.renewHook != nil {
		errs = c.renewHook(ctx, leases)
	} else {
		errs = c.renewRedis(ctx, leases)
	}
	for _, i := range heard {
		if i < len(errs) && errors.Is(errs[i], watchdog.ErrNotHeld) {
			errs[i] = errHeardGone
		}
	}
	return errs
}

// renewRedis is renew's calls to Redis.
func (c *Core) renewRedis(ctx context.Context, leases []*watchdog.Lease) []error {
	calls := make([]Call, 0, len(leases))
	cmds := make(rueidis.Commands, 0, len(leases))
	// sent[i] is the index in calls of lease i's call; -1 for a lease with
	// nothing to send (the wait record hash of a Client without records),
	// which counts as renewed.
	sent := make([]int, len(leases))
	for i, l := range leases {
		call := l.Value().(Renewable).RenewCall(l.Duration())
		if call.Script == nil {
			sent[i] = -1
			continue
		}
		sent[i] = len(calls)
		calls = append(calls, call)
		cmds = append(cmds, c.RDB.B().Evalsha().Sha1(call.Script.SHA1).Numkeys(int64(len(call.Keys))).
			Key(call.Keys...).Arg(call.Args...).Build())
	}
	errs := make([]error, len(leases))
	if len(cmds) == 0 {
		return errs
	}
	results := c.RDB.DoMulti(ctx, cmds...)
	for _, r := range results {
		if re, ok := rueidis.IsRedisErr(r.Error()); ok && re.IsNoScript() {
			results = c.renewLoading(ctx, calls)
			break
		}
	}
	for i, j := range sent {
		if j < 0 || j >= len(results) {
			continue
		}
		n, err := results[j].AsInt64()
		switch {
		case err != nil:
			errs[i] = err
		case n == 0:
			errs[i] = watchdog.ErrNotHeld
		}
		if r, ok := leases[i].Value().(replied); ok && err == nil {
			r.Replied(n)
		}
	}
	return errs
}

// replied is a Renewable that is told its call's reply (the wait record
// hash's, which says when records are missing).
type replied interface {
	Replied(n int64)
}

// renewLoading makes calls through ExecMulti, which loads each script
// first: one ExecMulti per script, the replies put back in calls' order.
func (c *Core) renewLoading(ctx context.Context, calls []Call) []rueidis.RedisResult {
	results := make([]rueidis.RedisResult, len(calls))
	done := make([]bool, len(calls))
	for i, call := range calls {
		if done[i] {
			continue
		}
		var (
			idx   []int
			execs []rueidis.LuaExec
		)
		for j := i; j < len(calls); j++ {
			if !done[j] && calls[j].Script == call.Script {
				done[j] = true
				idx = append(idx, j)
				execs = append(execs, rueidis.LuaExec{Keys: calls[j].Keys, Args: calls[j].Args})
			}
		}
		for k, r := range call.Script.ExecMulti(ctx, c.RDB, execs...) {
			results[idx[k]] = r
		}
	}
	return results
}
