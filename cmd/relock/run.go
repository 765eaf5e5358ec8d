package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/rlock"
)

const runUsage = `Usage: relock [CONNECTION FLAGS] run [-n|--no-wait] [--wait DUR] [--fair] [--fenced] NAME [--] COMMAND [ARG...]

Run COMMAND while holding the lock NAME: a distributed flock. relock waits
for the lock (without --wait, for as long as it takes; -n tries once),
starts COMMAND with relock's stdin, stdout and stderr, keeps the lock on
the watchdog lease while COMMAND runs, releases it as soon as COMMAND ends,
and exits with COMMAND's exit code. Put "--" before a COMMAND that starts
with "-".

COMMAND's environment gets RELOCK_NAME (the lock's name), RELOCK_OWNER (the
lock's hash field, <clientID>:<owner>, as 'relock status' shows it) and,
with --fenced, RELOCK_TOKEN: a fencing token greater than any handed out
before for NAME. Pass it to what the lock protects, so that a write made
after the lock was lost can be refused.

Lease: the lock's lease, --watchdog (2.4s), is renewed every third of it
(every 800ms), and each renewal checks the hold, so a lock that expires or
is deleted while COMMAND runs is noticed in under a second. If relock dies
(or is stopped), the lock frees after --watchdog. A longer --watchdog rides
out longer Redis outages, but notices a loss later, and frees the lock of a
relock that crashed later.

Lost lock: if the lock is lost while COMMAND runs (deleted, force-unlocked,
or no renewal succeeded for a whole lease), relock says so on stderr, sends
COMMAND SIGTERM, then SIGKILL after --grace, and exits 70. If the hold is
found gone only when relock releases it after COMMAND ended, relock says
when and exits 70 too: COMMAND ran part of its time without the lock.

Signals: COMMAND runs in a process group of its own. Every signal relock
gets (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH,
SIGTSTP, SIGCONT) is passed on to that group, so COMMAND gets it once,
whether it was sent to relock's PID or its process group. When stdin is the
terminal, COMMAND's group is the terminal's foreground group while it runs:
it can read the terminal, and Ctrl-C or Ctrl-Z reach it (once) straight
from the terminal. When COMMAND stops (Ctrl-Z), relock stops too, so the
shell gets the terminal back; 'fg' resumes both. A stopped relock renews
nothing: after --watchdog the lock is lost, and on 'fg' relock stops COMMAND
and exits 70. (Without a controlling terminal, relock keeps running, and
holding the lock, while COMMAND is stopped.) A signal that arrives while
relock still waits for the lock ends the wait: COMMAND does not run and
relock exits 128+N. On Linux,
COMMAND gets SIGTERM if relock itself dies (even by SIGKILL).

Exit codes:
  N      COMMAND's exit code; 128+N when COMMAND was killed by signal N
  64     bad command line
  69     Redis could not be reached, refused the password, failed TLS, or
         answered with an error, before COMMAND ran (a failed release
         afterwards is only a warning)
  70     the lock was lost while COMMAND ran (COMMAND was stopped), or was
         found gone when released
  75     --wait (or -n) ended without the lock (EX_TEMPFAIL); COMMAND did
         not run
  126    COMMAND could not be started; 127: COMMAND was not found
  128+N  relock got signal N while it waited for the lock

Examples:
  relock run nightly-report -- ./report.sh --full
  relock run -n cron:cleanup -- ./cleanup.sh
  relock --redis rediss://redis.internal:6380 run --wait 10s deploy:prod -- make deploy
  relock run --fenced orders -- sh -c './settle --token "$RELOCK_TOKEN"'`

// defaultRunWatchdog is run's watchdog lease: short, so that a loss is
// noticed in under a second (a renewal checks the hold every third of it,
// here every 800ms, and a round trip later the loss is known).
const defaultRunWatchdog = 2400 * time.Millisecond

// waitSignals end a wait for the lock.
var waitSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// Variables run puts in COMMAND's environment.
const (
	envName  = "RELOCK_NAME"
	envOwner = "RELOCK_OWNER"
	envToken = "RELOCK_TOKEN"
)

// locker is what run needs of a lock; *rlock.Lock, *rlock.FencedLock and
// *fairlock.Lock have it.
type locker interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
	Done(ctx context.Context) <-chan struct{}
}

func (cl *cli) run(args []string) int {
	fs := cl.newConnFlagSet("run", runUsage)
	var wait durationFlag
	fs.Var(&wait, "wait", "give up after waiting `DUR` for the lock and exit 75; 0 tries once (default: wait for as long as it takes)")
	noWait := fs.Bool("no-wait", false, "try once, as --wait 0: exit 75 at once if the lock is held")
	fs.alias("n", "no-wait")
	fair := fs.Bool("fair", false, "use a fair lock: waiters get it in the order they asked")
	fenced := fs.Bool("fenced", false, "use a fenced lock and give COMMAND its token in $RELOCK_TOKEN")
	watchdog := fs.duration("watchdog", defaultRunWatchdog, "`LEASE` kept renewed (every third of it, which is how soon a loss is noticed) while COMMAND runs; if relock dies the lock frees after this")
	grace := fs.duration("grace", 10*time.Second, "when the lock is lost: `DUR` between SIGTERM and SIGKILL to COMMAND")
	pos, argv, code := cl.parse(fs, args, 1)
	if code >= 0 {
		return code
	}
	if len(pos) == 0 {
		return cl.usageError(fs, "run needs a lock NAME and a COMMAND")
	}
	name := pos[0]
	if len(argv) == 0 {
		return cl.usageError(fs, "run needs a COMMAND to run under lock %q", name)
	}
	if _, err := cl.conn.lockName(name); err != nil {
		return cl.usageError(fs, "%v", err)
	}
	if err := lockcore.CheckConfig(lockcore.Config{WatchdogTimeout: watchdog.d, WatchdogTimeoutSet: true}); err != nil {
		return cl.usageError(fs, "--watchdog: %v", err)
	}
	if *noWait {
		if wait.set && wait.d != 0 {
			return cl.usageError(fs, "--no-wait and --wait %v disagree; give one", wait.d)
		}
		wait = durationFlag{d: 0, set: true}
	}
	if wait.set {
		if err := lockcore.CheckWait(wait.d); err != nil {
			return cl.usageError(fs, "--wait: %v", err)
		}
	}
	if *fair && *fenced {
		// A fenced lock is a reentrant lock with a token counter; the fair
		// lock has no tokens, and a fenced lock no queue.
		return cl.usageError(fs, "--fair and --fenced do not combine: the fair lock hands out no fencing tokens")
	}
	t, code := cl.target()
	if code >= 0 {
		return code
	}

	// Signals are caught from here on: one that comes before COMMAND
	// starts ends the wait; later ones go to COMMAND.
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, waitSignals...)
	defer signal.Stop(sigs)

	// One connection, auto-pipelined, as rlock.NewClient would make.
	opt := *t
	opt.opt.PipelineMultiplex = -1
	rdb, err := opt.dial()
	if err != nil {
		return cl.errorf(exitUnavailable, "%v", err)
	}
	defer rdb.Close()
	lost := make(chan error, 1)
	client, err := rlock.New(rdb, rlock.WithKeyPrefix(cl.conn.prefix),
		rlock.WithWatchdogTimeout(watchdog.d),
		rlock.WithLostHandler(func(lockName, _ string, cause error) {
			if lockName == name {
				select {
				case lost <- cause:
				default:
				}
			}
		}))
	if err != nil {
		return cl.errorf(exitFailure, "%v", err)
	}
	defer client.Close()

	var l locker
	switch {
	case *fair:
		l = client.GetFairLock(name)
	case *fenced:
		l = client.GetFencedLock(name)
	default:
		l = client.GetLock(name)
	}
	owner := runOwner()
	ctx := rlock.WithOwner(context.Background(), owner)
	token, code := cl.acquire(ctx, l, name, wait, sigs)
	if code >= 0 {
		return code
	}
	// Taken right after the acquisition: a hold lost before this is
	// reported by an already closed channel.
	done := l.Done(ctx)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cl.stdout, cl.stderr
	cmd.Env = commandEnv(os.Environ(), name, client.ID()+":"+owner, token, *fenced)
	signal.Notify(sigs, forwardedSignals...)
	j, err := startJob(cmd)
	if err != nil {
		cl.release(ctx, l, name)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return cl.errorf(exitNotFound, "%s: command not found", argv[0])
		}
		return cl.errorf(exitCannotExec, "cannot run %s: %v", argv[0], err)
	}
	return cl.supervise(ctx, j, l, name, sigs, done, lost, grace.d)
}

// commandEnv is COMMAND's environment: env with the RELOCK_ variables of
// this hold (and none left over from an outer relock).
func commandEnv(env []string, name, owner string, token int64, fenced bool) []string {
	env = slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == envName || k == envOwner || k == envToken
	})
	env = append(env, envName+"="+name, envOwner+"="+owner)
	if fenced {
		env = append(env, envToken+"="+strconv.FormatInt(token, 10))
	}
	return env
}

// acquire takes l, waiting as --wait says; a signal ends the wait. It
// returns code -1 when l is held (with its token, for a fenced lock), else
// the exit code.
func (cl *cli) acquire(ctx context.Context, l locker, name string, wait durationFlag, sigs <-chan os.Signal) (token int64, code int) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		token int64
		ok    bool
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		switch fl, fenced := l.(*rlock.FencedLock); {
		case fenced && wait.set:
			r.token, r.ok, r.err = fl.TryLockAndGetToken(wctx, wait.d, 0)
		case fenced:
			r.token, r.err = fl.LockAndGetToken(wctx)
			r.ok = r.err == nil
		case wait.set:
			r.ok, r.err = l.TryLock(wctx, wait.d, 0)
		default:
			r.err = l.Lock(wctx)
			r.ok = r.err == nil
		}
		done <- r
	}()
	var r result
	select {
	case r = <-done:
	case sig := <-sigs:
		cancel()
		if r = <-done; r.ok {
			cl.release(ctx, l, name)
		}
		cl.warnf("got %v while waiting for lock %q; not running the command", sig, name)
		return 0, exitSignalBase + signalNumber(sig)
	}
	switch {
	case r.err != nil:
		if errors.Is(r.err, rlock.ErrInvalidArgument) {
			return 0, cl.errorf(exitUsage, "%v", r.err)
		}
		return 0, cl.errorf(exitUnavailable, "waiting for lock %q: %v", name, oneLine(r.err))
	case !r.ok && wait.d == 0:
		return 0, cl.errorf(exitTempFail, "lock %q is held by another owner; not running the command", name)
	case !r.ok:
		return 0, cl.errorf(exitTempFail, "lock %q still held by another owner after waiting %v; not running the command", name, wait.d)
	}
	return r.token, -1
}

// supervise waits for the job while holding l: it passes signals on, stops
// the job when the lock is lost, and releases l when the job's process
// ends. It returns the exit code of relock.
func (cl *cli) supervise(ctx context.Context, j *job, l locker, name string, sigs <-chan os.Signal, done <-chan struct{}, lost <-chan error, grace time.Duration) int {
	prog := j.cmd.Args[0]
	started := time.Now()
	var lostAt time.Time
	var kill <-chan time.Time
	for {
		select {
		case ev := <-j.events:
			if ev.stopped {
				// Stopped by the terminal's Ctrl-Z or a signal: stop too,
				// so that a shell sees its job stop. SIGCONT resumes us,
				// and we pass it on.
				j.suspendSelf()
				continue
			}
			j.finish()
			if !lostAt.IsZero() {
				cl.release(ctx, l, "") // the hold is gone; this only makes sure
				return cl.errorf(exitLockLost, "%s ended (%s) after lock %q was lost", prog, ev.describe(), name)
			}
			return cl.releaseAfter(ctx, l, name, prog, ev, started)
		case sig := <-sigs:
			j.signal(sig)
		case <-done:
			done = nil
			lostAt = time.Now()
			cl.warnf("lock %q was lost while %s ran: %s", name, prog, lostCause(lost, name))
			cl.warnf("stopping %s (process group %d): SIGTERM now, SIGKILL in %v", prog, j.pgid(), grace)
			j.terminate()
			kill = time.After(grace)
		case <-kill:
			kill = nil
			cl.warnf("%s still running %v after SIGTERM; sending SIGKILL", prog, grace)
			j.signal(syscall.SIGKILL)
		}
	}
}

// lostCause says why the hold of name ended, from the lost handler's report
// when there is one.
func lostCause(lost <-chan error, name string) string {
	// The handler runs right after Done closes; give it a moment.
	select {
	case err := <-lost:
		return oneLine(err)
	case <-time.After(50 * time.Millisecond):
		return fmt.Sprintf("the hold of %q ended (expired, deleted or force-unlocked)", name)
	}
}

// releaseAfter releases l after COMMAND ended as ev says, and returns
// relock's exit code: COMMAND's, or 70 when the hold turns out to have
// been gone already.
func (cl *cli) releaseAfter(ctx context.Context, l locker, name, prog string, ev jobEvent, started time.Time) int {
	err := l.Unlock(ctx)
	switch {
	case err == nil:
		return ev.code()
	case errors.Is(err, rlock.ErrNotHeld) || errors.Is(err, rlock.ErrLockLost):
		now := time.Now()
		return cl.errorf(exitLockLost, "lock %q was already gone when %s ended (%s): found at release, at %s, %v after %s started; "+
			"it expired or was deleted while %s ran, so part of its run was not under the lock",
			name, prog, ev.describe(), now.Format("15:04:05.000"), now.Sub(started).Round(time.Millisecond), prog, prog)
	default:
		cl.warnf("could not release lock %q: %v (it frees when its lease runs out)", name, oneLine(err))
		return ev.code()
	}
}

// release unlocks l, and warns when that fails (with name set; an empty
// name means the outcome does not matter).
func (cl *cli) release(ctx context.Context, l locker, name string) {
	err := l.Unlock(ctx)
	if err != nil && name != "" {
		cl.warnf("could not release lock %q: %v (it frees when its lease runs out)", name, oneLine(err))
	}
}

// code is relock's exit code for how COMMAND ended: its exit code, or
// 128+N when signal N killed it, as a shell reports it.
func (ev jobEvent) code() int {
	switch {
	case ev.err != nil:
		return exitFailure
	case ev.status.Signaled():
		return exitSignalBase + int(ev.status.Signal())
	}
	return ev.status.ExitStatus()
}

// describe says how COMMAND ended.
func (ev jobEvent) describe() string {
	switch {
	case ev.err != nil:
		return ev.err.Error()
	case ev.status.Signaled():
		return "killed by " + signalName(ev.status.Signal())
	}
	return fmt.Sprintf("exit status %d", ev.status.ExitStatus())
}

func signalNumber(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return int(s)
	}
	return 0
}

// runOwner is the owner run holds locks as: "run:<host>:<pid>", so status
// shows where the holder runs.
func runOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	host = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return -1
		}
		return r
	}, host)
	if len(host) > 200 {
		host = host[:200]
	}
	return fmt.Sprintf("run:%s:%d", host, os.Getpid())
}
