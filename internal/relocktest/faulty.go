package relocktest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/require"
)

// Faulty is a rueidis.Client that answers chosen scripts with an injected
// reply, and counts the commands it is given: the way to put a fault that
// a real server cannot produce on cue (a lost reply, a reply that never
// comes, LOADING at the worst moment) under a real Client. Error replies
// come from a real server (ErrorReply), so they are the *rueidis.RedisError
// values a real LOADING or READONLY reply would be.
type Faulty struct {
	rueidis.Client
	commands atomic.Int64

	mu    sync.Mutex
	rules []*Rule
}

// Rule answers the next N calls of the scripts with these SHA1s (N < 0:
// every call).
type Rule struct {
	SHA1s []string
	N     int
	// Reply is what the caller gets, unless Keep is set.
	Reply rueidis.RedisResult
	// Run makes the script run on the server first; only its reply is
	// replaced (a lost reply), unless Keep is set.
	Run bool
	// Keep, with Run, passes the script's own reply on.
	Keep bool
	// Hang makes the call wait for its context to end, as for a reply that
	// never comes (after running the script when Run is set), and answer
	// with the context's error.
	Hang bool
	// Match, if set, picks the calls the rule answers by their arguments
	// (the command's words: EVALSHA, sha, numkeys, keys..., args...).
	Match func(args []string) bool
	// Before, if set, is called before the script runs, and After after it
	// ran (or would have), with the command's words: to cancel the caller's
	// context at that moment.
	Before, After func(args []string)

	hits atomic.Int64
}

// Hits is how many calls the rule answered.
func (r *Rule) Hits() int64 { return r.hits.Load() }

// NewFaulty wraps rdb.
func NewFaulty(rdb rueidis.Client) *Faulty { return &Faulty{Client: rdb} }

// Commands is how many commands went through f.
func (f *Faulty) Commands() int64 { return f.commands.Load() }

// Inject adds a rule and returns it.
func (f *Faulty) Inject(r *Rule) *Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, r)
	return r
}

// Clear drops every rule.
func (f *Faulty) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// rule returns the rule that answers cmd (EVALSHA or EVAL of one of its
// scripts), if any.
func (f *Faulty) rule(cmd rueidis.Completed) *Rule {
	args := cmd.Commands()
	sha := ScriptSHA1(args)
	if sha == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.N != 0 && slices.Contains(r.SHA1s, sha) && (r.Match == nil || r.Match(args)) {
			return r
		}
	}
	return nil
}

// take uses up one call of r.
func (f *Faulty) take(r *Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.N > 0 {
		r.N--
	}
	r.hits.Add(1)
}

// answer runs cmd as r says and returns what the caller gets.
func (f *Faulty) answer(ctx context.Context, r *Rule, args []string, run func() rueidis.RedisResult) rueidis.RedisResult {
	if r.Before != nil {
		r.Before(args)
	}
	var res rueidis.RedisResult
	if r.Run {
		res = run()
		if e, ok := rueidis.IsRedisErr(res.Error()); ok && e.IsNoScript() {
			return res // it did not run: EVAL comes next, and the rule answers that
		}
	}
	f.take(r)
	if r.After != nil {
		r.After(args)
	}
	if r.Hang {
		<-ctx.Done()
		return rueidis.NewErrorResult(ctx.Err())
	}
	if r.Keep {
		return res
	}
	return r.Reply
}

// Do runs cmd, or answers it by a rule.
func (f *Faulty) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	f.commands.Add(1)
	r := f.rule(cmd)
	if r == nil {
		return f.Client.Do(ctx, cmd)
	}
	// A copy: rueidis recycles a command once it has been sent.
	args := slices.Clone(cmd.Commands())
	return f.answer(ctx, r, args, func() rueidis.RedisResult { return f.Client.Do(ctx, cmd) })
}

// DoMulti runs cmds, answering those a rule matches by the rule.
func (f *Faulty) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(cmds))
	for _, c := range cmds {
		if f.rule(c) == nil {
			continue
		}
		// A pipeline with a faulty command: send them one by one.
		for j, c := range cmds {
			out[j] = f.Do(ctx, c)
		}
		return out
	}
	f.commands.Add(int64(len(cmds)))
	return f.Client.DoMulti(ctx, cmds...)
}

// Receive counts the command and passes it on.
func (f *Faulty) Receive(ctx context.Context, cmd rueidis.Completed, fn func(rueidis.PubSubMessage)) error {
	f.commands.Add(1)
	return f.Client.Receive(ctx, cmd, fn)
}

// Dedicate counts the connection and passes it on.
func (f *Faulty) Dedicate() (rueidis.DedicatedClient, func()) {
	f.commands.Add(1)
	return f.Client.Dedicate()
}

// ErrorReply returns an error reply with msg, made by the server of raw.
func ErrorReply(t testing.TB, raw rueidis.Client, msg string) rueidis.RedisResult {
	t.Helper()
	res := raw.Do(context.Background(), raw.B().Eval().Script("return redis.error_reply(ARGV[1])").Numkeys(0).Arg(msg).Build())
	_, ok := rueidis.IsRedisErr(res.Error())
	require.True(t, ok, "error reply %q: got %v, want a Redis error reply", msg, res.Error())
	return res
}

// LostReply is the result of a call whose connection dropped before the
// reply came.
func LostReply() rueidis.RedisResult {
	return rueidis.NewErrorResult(errors.New("injected: connection reset by peer"))
}

// ScriptSHA1 is the SHA1 of the script a command runs, from its words
// (EVALSHA and EVALSHA_RO name it, EVAL and EVAL_RO carry its body), or ""
// for a command that runs no script.
func ScriptSHA1(args []string) string {
	if len(args) < 2 {
		return ""
	}
	switch strings.ToUpper(args[0]) {
	case "EVALSHA", "EVALSHA_RO":
		return args[1]
	case "EVAL", "EVAL_RO":
		sum := sha1.Sum([]byte(args[1]))
		return hex.EncodeToString(sum[:])
	}
	return ""
}
