package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/rlock"
)

const runUsage = `Usage: relock [CONNECTION FLAGS] run [--wait DUR] [--fair] NAME [--] COMMAND [ARG...]

Run COMMAND while holding the lock NAME: a distributed flock. relock waits
for the lock (without --wait, for as long as it takes), starts COMMAND with
relock's stdin, stdout and stderr, keeps the lock on the watchdog lease
(renewed every third of --watchdog) while COMMAND runs, releases it as soon
as COMMAND ends, and exits with COMMAND's exit code. Put "--" before a
COMMAND that starts with "-".

Signals: SIGINT, SIGTERM and SIGHUP sent to relock are passed on to
COMMAND; relock then waits for COMMAND to end, releases the lock at once
and exits with COMMAND's code (128+N if COMMAND died of signal N). A signal
that arrives while relock still waits for the lock ends the wait: COMMAND
does not run and relock exits 128+N. On Linux, COMMAND gets SIGTERM if
relock itself dies (even by SIGKILL); the lock then frees when its lease
runs out.

Lost lock: if the lock is lost while COMMAND runs (renewals failed for a
whole lease, or someone ran 'relock unlock --force'), relock says so on
stderr, sends COMMAND SIGTERM, then SIGKILL after --grace, and exits 70.

Exit codes:
  N      COMMAND's exit code; 128+N when COMMAND was killed by signal N
  64     bad command line
  69     Redis could not be reached, refused the password, failed TLS, or
         answered with an error, before COMMAND ran (a failed release
         afterwards is only a warning)
  70     the lock was lost while COMMAND ran; COMMAND was stopped
  75     --wait ended without the lock (EX_TEMPFAIL); COMMAND did not run
  126    COMMAND could not be started; 127: COMMAND was not found
  128+N  relock got signal N while it waited for the lock

Examples:
  relock run nightly-report -- ./report.sh --full
  relock --redis rediss://redis.internal:6380 run --wait 10s deploy:prod -- make deploy`

// forwardedSignals are passed on to COMMAND.
var forwardedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}

// locker is what run needs of a lock; *rlock.Lock and *fairlock.Lock have it.
type locker interface {
	Lock(ctx context.Context) error
	TryLock(ctx context.Context, wait, lease time.Duration) (bool, error)
	Unlock(ctx context.Context) error
}

func (cl *cli) run(args []string) int {
	fs := cl.newConnFlagSet("run", runUsage)
	var wait optDuration
	fs.Var(&wait, "wait", "give up after waiting `DUR` for the lock and exit 75; 0 tries once (default: wait for as long as it takes)")
	fair := fs.Bool("fair", false, "use a fair lock: waiters get it in the order they asked")
	watchdog := fs.duration("watchdog", lockcore.DefaultWatchdogTimeout, "`LEASE` kept renewed while COMMAND runs; if relock dies the lock frees after at most this")
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
	if err := lockcore.CheckName(name); err != nil {
		return cl.usageError(fs, "%v", err)
	}
	if err := lockcore.CheckConfig(lockcore.Config{WatchdogTimeout: *watchdog, WatchdogTimeoutSet: true}); err != nil {
		return cl.usageError(fs, "--watchdog: %v", err)
	}
	if wait.set {
		if err := lockcore.CheckWait(wait.d); err != nil {
			return cl.usageError(fs, "--wait: %v", err)
		}
	}

	t, code := cl.target()
	if code >= 0 {
		return code
	}

	// Signals are caught from here on: one that comes before COMMAND
	// starts ends the wait; later ones go to COMMAND.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwardedSignals...)
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
	client, err := rlock.New(rdb,
		rlock.WithWatchdogTimeout(*watchdog),
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

	var l locker = client.GetLock(name)
	if *fair {
		l = client.GetFairLock(name)
	}
	ctx := rlock.WithOwner(context.Background(), runOwner())
	if code := cl.acquire(ctx, l, name, wait, sigs); code >= 0 {
		return code
	}

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, cl.stdout, cl.stderr
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		cl.release(ctx, l, name)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
			return cl.errorf(exitNotFound, "%s: command not found", argv[0])
		}
		return cl.errorf(exitCannotExec, "cannot run %s: %v", argv[0], err)
	}
	return cl.supervise(ctx, cmd, l, name, sigs, lost, *grace)
}

// acquire takes l, waiting as --wait says; a signal ends the wait. It
// returns -1 when l is held, else the exit code.
func (cl *cli) acquire(ctx context.Context, l locker, name string, wait optDuration, sigs <-chan os.Signal) int {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		ok  bool
		err error
	}
	done := make(chan result, 1)
	go func() {
		if wait.set {
			ok, err := l.TryLock(wctx, wait.d, 0)
			done <- result{ok, err}
			return
		}
		err := l.Lock(wctx)
		done <- result{err == nil, err}
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
		return exitSignalBase + signalNumber(sig)
	}
	switch {
	case r.err != nil:
		if errors.Is(r.err, rlock.ErrInvalidArgument) {
			return cl.errorf(exitUsage, "%v", r.err)
		}
		return cl.errorf(exitUnavailable, "waiting for lock %q: %v", name, r.err)
	case !r.ok && wait.d == 0:
		return cl.errorf(exitTempFail, "lock %q is held by another owner; not running the command", name)
	case !r.ok:
		return cl.errorf(exitTempFail, "lock %q still held by another owner after waiting %v; not running the command", name, wait.d)
	}
	return -1
}

// supervise waits for cmd while holding l: it passes signals on, stops cmd
// when the lock is lost, and releases l when cmd ends. It returns the exit
// code of relock.
func (cl *cli) supervise(ctx context.Context, cmd *exec.Cmd, l locker, name string, sigs <-chan os.Signal, lost <-chan error, grace time.Duration) int {
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	prog := cmd.Args[0]
	var lostCause error
	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			if lostCause != nil {
				cl.release(ctx, l, "") // the hold is gone; this only makes sure
				return cl.errorf(exitLockLost, "%s ended (%s) after lock %q was lost", prog, describeExit(err), name)
			}
			cl.release(ctx, l, name)
			return exitCode(err)
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig)
		case lostCause = <-lost:
			lost = nil
			cl.warnf("lock %q was lost while %s ran: %s", name, prog, oneLine(lostCause))
			cl.warnf("stopping %s (pid %d): SIGTERM now, SIGKILL in %v", prog, cmd.Process.Pid, grace)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			kill = time.After(grace)
		case <-kill:
			kill = nil
			cl.warnf("%s still running %v after SIGTERM; sending SIGKILL", prog, grace)
			_ = cmd.Process.Kill()
		}
	}
}

// release unlocks l on a fresh context, and warns when that fails (with
// name set; an empty name means the outcome does not matter).
func (cl *cli) release(ctx context.Context, l locker, name string) {
	err := l.Unlock(ctx)
	if err != nil && name != "" {
		cl.warnf("could not release lock %q: %v (it frees when its lease runs out)", name, err)
	}
}

// exitCode is relock's exit code for the outcome of cmd.Wait: the child's
// code, or 128+N when signal N killed it, as a shell reports it.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return exitSignalBase + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return exitFailure
}

// describeExit says how a child ended.
func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
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
