package main

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/rlock"
)

// countingClient is a rueidis.Client, passed to rlock.New, that counts
// what the library sends: calls of Do (each at most one round trip),
// calls of DoMulti (one pipeline each) and the scripts in them, by SHA1.
type countingClient struct {
	rueidis.Client
	*counters
}

type counters struct {
	do       atomic.Int64
	doMulti  atomic.Int64
	multiCmd atomic.Int64
	scripts  sync.Map // sha1 -> *atomic.Int64, scripts sent with Do
	piped    sync.Map // sha1 -> *atomic.Int64, scripts sent with DoMulti
}

func newCountingClient(rdb rueidis.Client) countingClient {
	return countingClient{Client: rdb, counters: &counters{}}
}

func (c countingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.do.Add(1)
	countScript(&c.scripts, cmd.Commands())
	return c.Client.Do(ctx, cmd)
}

func (c countingClient) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	c.doMulti.Add(1)
	c.multiCmd.Add(int64(len(multi)))
	for i := range multi {
		countScript(&c.piped, multi[i].Commands())
	}
	return c.Client.DoMulti(ctx, multi...)
}

// Nodes wraps the node clients too: rueidis sends SCRIPT LOAD through them
// before every ExecMulti.
func (c countingClient) Nodes() map[string]rueidis.Client {
	m := c.Client.Nodes()
	for k, n := range m {
		m[k] = countingClient{Client: n, counters: c.counters}
	}
	return m
}

// countScript counts an EVALSHA or EVAL by the script's SHA1. It reads the
// command before it is handed to rueidis, which recycles it.
func countScript(m *sync.Map, cmd []string) {
	if len(cmd) < 2 {
		return
	}
	var sha string
	switch cmd[0] {
	case "EVALSHA", "EVALSHA_RO":
		sha = cmd[1]
	case "EVAL", "EVAL_RO":
		sum := sha1.Sum([]byte(cmd[1]))
		sha = hex.EncodeToString(sum[:])
	default:
		return
	}
	v, ok := m.Load(sha)
	if !ok {
		v, _ = m.LoadOrStore(sha, new(atomic.Int64))
	}
	v.(*atomic.Int64).Add(1)
}

func snapshot(m *sync.Map) map[string]int64 {
	out := make(map[string]int64)
	m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// count is the number of scripts sha sent so far with Do.
func (c *counters) count(sha string) int64 {
	if v, ok := c.scripts.Load(sha); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// pipedScripts is the number of scripts sent so far with DoMulti.
func (c *counters) pipedScripts() int64 {
	var n int64
	for _, v := range snapshot(&c.piped) {
		n += v
	}
	return n
}

// callCounts is a snapshot of the calls made so far.
type callCounts struct {
	Do, DoMulti, MultiCmds, Piped int64
}

func (c *counters) calls() callCounts {
	return callCounts{c.do.Load(), c.doMulti.Load(), c.multiCmd.Load(), c.pipedScripts()}
}

func (a callCounts) sub(b callCounts) callCounts {
	return callCounts{a.Do - b.Do, a.DoMulti - b.DoMulti, a.MultiCmds - b.MultiCmds, a.Piped - b.Piped}
}

// scriptSHAs learns the SHA1s of relock's acquire and unlock scripts by
// watching one Lock and one Unlock on a scratch lock, so that the scale
// runs can count them without knowing the scripts' text.
func scriptSHAs(ctx context.Context, c *rlock.Client, cc countingClient) (acquire, unlock string, err error) {
	l := c.GetLock("bench:calibrate")
	learn := func(fn func(context.Context) error) (string, error) {
		before := snapshot(&cc.scripts)
		if err := fn(ctx); err != nil {
			return "", err
		}
		after := snapshot(&cc.scripts)
		var found []string
		for sha, n := range after {
			if n > before[sha] {
				found = append(found, sha)
			}
		}
		if len(found) != 1 {
			slices.Sort(found)
			return "", fmt.Errorf("calibration: expected one script, saw %v", found)
		}
		return found[0], nil
	}
	if acquire, err = learn(l.Lock); err != nil {
		return "", "", err
	}
	if unlock, err = learn(l.Unlock); err != nil {
		return "", "", err
	}
	return acquire, unlock, nil
}
