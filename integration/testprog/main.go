// Command testprog is one contender in relock's reliability tests: it takes
// a fenced lock over and over, writes through a fenced register while it
// holds it, and records every operation as a JSON line on stdout (see
// package checker). It stops when its standard input is closed.
//
// Odd rounds use LockAndGetToken and Unlock (every third round re-enters
// once); even rounds use Do. Round -stall-at holds the lock for -stall
// before writing, without looking at its context, like a process stopped
// by a long pause; the test stops it meanwhile with SIGSTOP or SIGKILL.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/fence"
	"github.com/relock-go/relock/integration/checker"
	"github.com/relock-go/relock/rlock"
)

type prog struct {
	id        string
	hold      time.Duration
	stall     time.Duration
	stallAt   int
	opTimeout time.Duration
	fenced    bool
	lock      *rlock.FencedLock
	regRDB    rueidis.Client
	reg       *fence.Register

	mu  sync.Mutex
	enc *json.Encoder
	seq int
}

func main() {
	var (
		addr      = flag.String("addr", "", "the lock's Redis server")
		regAddr   = flag.String("reg-addr", "", "the register's Redis server")
		name      = flag.String("name", "", "lock name")
		regKey    = flag.String("reg", "", "register key")
		id        = flag.String("id", "", "process ID, also the lock owner")
		watchdog  = flag.Duration("watchdog", time.Second, "watchdog timeout")
		hold      = flag.Duration("hold", 2*time.Millisecond, "time held before writing")
		fenced    = flag.Bool("fence", true, "write through the fenced register (else a plain HSET)")
		stallAt   = flag.Int("stall-at", 0, "round that stalls while holding (0: none)")
		stall     = flag.Duration("stall", 0, "how long that round stalls")
		opTimeout = flag.Duration("op-timeout", 30*time.Second, "bound of one acquisition")
	)
	flag.Parse()
	if err := run(*addr, *regAddr, *name, *regKey, *watchdog, &prog{
		id: *id, hold: *hold, stall: *stall, stallAt: *stallAt, opTimeout: *opTimeout, fenced: *fenced,
		enc: json.NewEncoder(os.Stdout),
	}); err != nil {
		fmt.Fprintln(os.Stderr, "testprog:", err)
		os.Exit(2)
	}
}

func run(addr, regAddr, name, regKey string, watchdog time.Duration, p *prog) error {
	c, err := rlock.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true},
		rlock.WithWatchdogTimeout(watchdog))
	if err != nil {
		return err
	}
	defer c.Close()
	p.regRDB, err = rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{regAddr}, DisableCache: true})
	if err != nil {
		return err
	}
	defer p.regRDB.Close()
	p.reg = fence.NewRegister(p.regRDB, regKey)
	p.lock = c.GetFencedLock(name)

	stopped, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop()
	}()
	ctx := rlock.WithOwner(stopped, p.id)
	p.emit(checker.Record{Kind: checker.Start, Phase: checker.Whole, Call: now()})
	for round := 1; ctx.Err() == nil; round++ {
		if round == p.stallAt || round%2 == 0 {
			p.doRound(ctx, round == p.stallAt)
		} else {
			p.tokenRound(ctx, round%3 == 0)
		}
	}
	return nil
}

func now() int64 { return time.Now().UnixNano() }

func (p *prog) emit(r checker.Record) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.Proc = p.id
	if r.Owner == "" && r.Kind != checker.Write {
		r.Owner = p.id
	}
	_ = p.enc.Encode(r) // one write(2) per record
}

func (p *prog) nextSeq() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	return p.seq
}

// call records the start of an operation and returns its record, which
// has the operation's sequence number.
func (p *prog) call(kind checker.Kind, r checker.Record) checker.Record {
	if r.Seq == 0 {
		r.Seq = p.nextSeq()
	}
	r.Kind, r.Phase = kind, checker.Call
	if r.Call == 0 {
		r.Call = now()
	}
	p.emit(r)
	return r
}

// ret records the return of the operation begun with c.
func (p *prog) ret(c checker.Record, res checker.Result, err error) {
	c.Phase, c.Result = checker.Return, res
	if c.Return == 0 {
		c.Return = now()
	}
	if err != nil {
		c.Err = err.Error()
	}
	p.emit(c)
}

func (p *prog) lost(start, at int64, cause error) {
	r := checker.Record{Seq: p.nextSeq(), Kind: checker.Lost, Phase: checker.Whole, Call: start, Return: at, Result: checker.OK}
	if cause != nil {
		r.Err = cause.Error()
	}
	p.emit(r)
}

func acquireResult(err error) checker.Result {
	if err != nil {
		return checker.Fail
	}
	return checker.OK
}

func releaseResult(err error) checker.Result {
	switch {
	case err == nil:
		return checker.OK
	case errors.Is(err, rlock.ErrNotHeld):
		return checker.NotHeld
	}
	return checker.Fail
}

func (p *prog) backoff(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(20 * time.Millisecond):
	}
}

// tokenRound: LockAndGetToken (and a re-entry), write, Unlock each level.
// A loss is noticed on Done; an Unlock that finds nothing is a loss too.
func (p *prog) tokenRound(ctx context.Context, reenter bool) {
	actx, cancel := context.WithTimeout(ctx, p.opTimeout)
	defer cancel()
	c := p.call(checker.Acquire, checker.Record{})
	token, err := p.lock.LockAndGetToken(actx)
	c.Token = token
	p.ret(c, acquireResult(err), err)
	if err != nil {
		p.backoff(ctx)
		return
	}
	// The hold may have begun as soon as the acquisition was sent, and its
	// lease may have run out before the reply came (a server stalled with
	// the reply in its buffer): a loss may date from the call on.
	start := c.Call
	done := p.lock.Done(ctx)
	var endedAt atomic.Int64
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		<-done
		endedAt.Store(now())
	}()
	levels := 1
	if reenter {
		c := p.call(checker.Acquire, checker.Record{Reentry: true})
		t, err := p.lock.LockAndGetToken(actx)
		c.Token = t
		p.ret(c, acquireResult(err), err)
		if err == nil {
			levels++
		}
	}
	time.Sleep(p.hold) // the holder's work: the scenario, not a wait
	p.write(token)
	lostNoticed := false
	select {
	case <-done:
		<-watching
		p.lost(start, endedAt.Load(), errors.New("the hold's Done channel closed while it was held"))
		lostNoticed = true
	default:
	}
	for ; levels > 0; levels-- {
		c := p.call(checker.Release, checker.Record{})
		err := p.lock.Unlock(ctx)
		res := releaseResult(err)
		if res == checker.NotHeld && !lostNoticed {
			p.lost(start, now(), err)
			lostNoticed = true
		}
		p.ret(c, res, err)
	}
}

// doRound: Do, with the token read inside; a stalling round does not look
// at its context until it has written.
func (p *prog) doRound(ctx context.Context, stall bool) {
	actx, cancel := context.WithTimeout(ctx, p.opTimeout)
	defer cancel()
	c := p.call(checker.Acquire, checker.Record{})
	var (
		start   int64
		lostAt  atomic.Int64
		lostErr atomic.Value
		rel     checker.Record
	)
	err := p.lock.Do(actx, func(fctx context.Context) error {
		start = now()
		context.AfterFunc(fctx, func() {
			if cause := context.Cause(fctx); errors.Is(cause, rlock.ErrLockLost) {
				lostErr.Store(cause)
				lostAt.Store(now())
			}
		})
		token, err := p.lock.Token(fctx)
		c.Token, c.Return = token, start
		p.ret(c, checker.OK, nil)
		if stall {
			p.emit(checker.Record{Kind: checker.Stall, Phase: checker.Whole, Call: now(), Token: token})
			time.Sleep(p.stall) // a stall while holding: the test pauses or kills the process meanwhile
		} else {
			time.Sleep(p.hold) // the holder's work: the scenario, not a wait
		}
		if err == nil {
			p.write(token)
		}
		if stall {
			// Having written, the stalled round looks at its context,
			// as a well-behaved function would, for up to a lease.
			select {
			case <-fctx.Done():
			case <-time.After(p.opTimeout):
			}
		}
		rel = p.call(checker.Release, checker.Record{})
		return nil
	})
	end := now()
	if start == 0 {
		c.Return = end
		p.ret(c, checker.Fail, err)
		p.backoff(ctx)
		return
	}
	lost := false
	// A loss may date from the acquisition's call (see tokenRound).
	if at := lostAt.Load(); at != 0 {
		p.lost(c.Call, at, lostErr.Load().(error))
		lost = true
	}
	res := releaseResult(err)
	switch {
	case res == checker.NotHeld && !lost:
		p.lost(c.Call, end, err)
	case errors.Is(err, rlock.ErrLockLost):
		res = checker.Unknown // Do's Unlock result is not reported
	}
	rel.Return = end
	p.ret(rel, res, err)
}

// write writes token and a unique value through the register, or with a
// plain HSET when fencing is off.
func (p *prog) write(token int64) {
	seq := p.nextSeq()
	c := p.call(checker.Write, checker.Record{Seq: seq, Token: token, Value: fmt.Sprintf("%s-%d", p.id, seq)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var err error
	if p.fenced {
		err = p.reg.Write(ctx, token, c.Value)
	} else {
		err = p.regRDB.Do(ctx, p.regRDB.B().Hset().Key(p.reg.Key()).FieldValue().
			FieldValue("token", fmt.Sprint(token)).FieldValue("value", c.Value).Build()).Error()
	}
	switch {
	case err == nil:
		p.ret(c, checker.OK, nil)
	case errors.Is(err, fence.ErrStaleToken):
		p.ret(c, checker.Stale, err)
	default:
		p.ret(c, checker.Fail, err)
	}
}
