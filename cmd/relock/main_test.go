package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/redistest"
)

// raceEnabled is set (by race_test.go) when the tests run with -race; the
// relock binary is then built with -race too.
var raceEnabled bool

// relockBin is the relock binary the tests run, built once by TestMain
// (with -race when the tests run with it).
var relockBin string

// TestMain builds the binary, runs the tests with redistest.Run (which
// stops the shared server and looks for leaked goroutines), and removes
// the binary.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "relock-cmd-test-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	relockBin = filepath.Join(dir, "relock")
	args := []string{"build", "-o", relockBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := redistest.Run(m, redistest.ClusterLeftovers...)
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// server is the package's shared redis-server.
func server(t *testing.T) *redistest.Server {
	t.Helper()
	return redistest.Shared(t)
}

// proc is one relock process started by a test. Its output goes to files,
// so that a grandchild holding them open never delays Wait.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr *os.File
	started        time.Time
	done           chan struct{}
}

// result is how a relock process ended.
type result struct {
	code           int // exit code; 128+N when killed by signal N
	stdout, stderr string
	took           time.Duration
}

// startRelock starts relock with args; the test ends it if still running.
func startRelock(t *testing.T, args ...string) *proc {
	t.Helper()
	return startRelockWith(t, procOptions{}, args...)
}

// procOptions change how startRelockWith starts relock.
type procOptions struct {
	env     []string // added to the environment
	setpgid bool     // in a process group of its own
}

// startRelockWith is startRelock with options.
func startRelockWith(t *testing.T, o procOptions, args ...string) *proc {
	t.Helper()
	dir := t.TempDir()
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	require.NoError(t, err)
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	require.NoError(t, err)
	cmd := exec.Command(relockBin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A -race binary sleeps 1s at exit unless told not to; a race it finds
	// makes it exit 66, which fails the test.
	cmd.Env = append(os.Environ(), "RELOCK_REDIS=", "RELOCK_PREFIX=", "RELOCK_PASSWORD=", "REDISCLI_AUTH=", "NO_COLOR=1", "GORACE=atexit_sleep_ms=0 exitcode=66")
	cmd.Env = append(cmd.Env, o.env...)
	if o.setpgid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p := &proc{t: t, cmd: cmd, stdout: stdout, stderr: stderr, started: time.Now(), done: make(chan struct{})}
	require.NoError(t, cmd.Start(), "start relock")
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		stdout.Close()
		stderr.Close()
	})
	return p
}

// wait waits up to timeout for p to end.
func (p *proc) wait(timeout time.Duration) result {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		_ = p.cmd.Process.Kill()
		<-p.done
		out, errOut := p.output()
		require.Failf(p.t, "relock still running", "relock %s still running after %v\nstdout:\n%s\nstderr:\n%s",
			strings.Join(p.cmd.Args[1:], " "), timeout, out, errOut)
	}
	r := result{took: time.Since(p.started)}
	r.stdout, r.stderr = p.output()
	ps := p.cmd.ProcessState
	r.code = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.code = 128 + int(ws.Signal())
	}
	return r
}

func (p *proc) output() (stdout, stderr string) {
	a, _ := os.ReadFile(p.stdout.Name())
	b, _ := os.ReadFile(p.stderr.Name())
	return string(a), string(b)
}

// describe is p's output so far, for a failure message.
func (p *proc) describe() string {
	out, errOut := p.output()
	return fmt.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut)
}

// relock runs relock with args to its end (at most 30s).
func relock(t *testing.T, args ...string) result {
	t.Helper()
	return startRelock(t, args...).wait(30 * time.Second)
}

// relockEnv is relock with env added to its environment.
func relockEnv(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return startRelockWith(t, procOptions{env: env}, args...).wait(30 * time.Second)
}

// wantCode fails t now unless r ended with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	require.Equal(t, code, r.code, "exit code\nstdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}

// mkfifo makes a named pipe.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// pollEvery is how often waitUntil asks again.
const pollEvery = 5 * time.Millisecond

// waitUntil asks cond, on the test's goroutine, until it reports done,
// and fails t now when cond returns an error (what it waits for can no
// longer happen) or timeout passes; a timeout's message ends with what
// detail returns, if given. It is the one polling helper of the
// package's tests: conditions report, they never fail t themselves.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() (done bool, err error), detail ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, err := cond()
		require.NoError(t, err, "waiting for %s", what)
		if done {
			return
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %v waiting for %s", timeout, what)
			for _, d := range detail {
				msg += "\n" + d()
			}
			require.Fail(t, msg)
		}
		time.Sleep(pollEvery)
	}
}

// waitFile waits until a child's marker file at path holds a complete
// line and returns its content; ended closes when the child is gone (then
// the wait fails, with describe's output). A child makes the file (its
// shell's redirection) before it writes to it: a file that exists may
// still be empty, so only the line's end says it is whole. Children write
// markers with shell builtins (echo, printf), one write each, after the
// state they mark.
func waitFile(t *testing.T, path string, ended <-chan struct{}, describe func() string) string {
	t.Helper()
	var content string
	waitUntil(t, 15*time.Second, "a line in "+path, func() (bool, error) {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			content = string(b)
			return true, nil
		}
		select {
		case <-ended:
			return false, fmt.Errorf("the child ended before it wrote %s\n%s", path, describe())
		default:
		}
		return false, nil
	}, describe)
	return content
}

// waitReady is waitFile for a relock process.
func waitReady(t *testing.T, path string, p *proc) string {
	t.Helper()
	return waitFile(t, path, p.done, p.describe)
}
