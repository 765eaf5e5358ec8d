package relocktest

import (
	"context"

	"github.com/redis/rueidis"
)

// Tap is a rueidis.Client that shows chosen commands and their replies to
// a test: the way to learn that a Client has reached a point of its own
// (sent a read, got its reply) without changing what it does. Everything
// else passes through untouched.
type Tap struct {
	rueidis.Client
	// Watch, if set, is called with each command's words (EVALSHA, sha,
	// numkeys, keys..., args... for a script) before it is sent; it
	// returns the function to call with the reply, or nil to let the
	// command pass unwatched. It must not keep args.
	Watch func(args []string) func(rueidis.RedisResult)
}

// NewTap wraps rdb; watch may be nil (nothing is watched).
func NewTap(rdb rueidis.Client, watch func(args []string) func(rueidis.RedisResult)) *Tap {
	return &Tap{Client: rdb, Watch: watch}
}

func (t *Tap) watch(cmd rueidis.Completed) func(rueidis.RedisResult) {
	if t.Watch == nil {
		return nil
	}
	return t.Watch(cmd.Commands())
}

// Do passes cmd on and shows its reply to the watcher.
func (t *Tap) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	done := t.watch(cmd) // before sending: rueidis recycles a sent command
	res := t.Client.Do(ctx, cmd)
	if done != nil {
		done(res)
	}
	return res
}

// DoMulti passes cmds on and shows the watched ones' replies.
func (t *Tap) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	var dones []func(rueidis.RedisResult)
	for i, c := range cmds {
		if done := t.watch(c); done != nil {
			if dones == nil {
				dones = make([]func(rueidis.RedisResult), len(cmds))
			}
			dones[i] = done
		}
	}
	res := t.Client.DoMulti(ctx, cmds...)
	for i, done := range dones {
		if done != nil && i < len(res) {
			done(res[i])
		}
	}
	return res
}
