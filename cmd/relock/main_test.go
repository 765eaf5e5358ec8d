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

	"github.com/relock-go/relock/internal/redistest"
	"github.com/relock-go/relock/internal/relocktest"
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
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(relockBin, args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// A -race binary sleeps 1s at exit unless told not to; a race it finds
	// makes it exit 66, which fails the test.
	cmd.Env = append(os.Environ(), "RELOCK_REDIS=", "RELOCK_PASSWORD=", "REDISCLI_AUTH=", "NO_COLOR=1", "GORACE=atexit_sleep_ms=0 exitcode=66")
	cmd.Env = append(cmd.Env, o.env...)
	if o.setpgid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	p := &proc{t: t, cmd: cmd, stdout: stdout, stderr: stderr, started: time.Now(), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start relock: %v", err)
	}
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
		p.t.Fatalf("relock %s still running after %v\nstdout:\n%s\nstderr:\n%s", strings.Join(p.cmd.Args[1:], " "), timeout, out, errOut)
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

// wantCode fails t unless r ended with code.
func wantCode(t *testing.T, r result, code int) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code = %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
}

// mkfifo makes a named pipe.
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }

// waitFile waits until path exists: a child's sign that it runs.
func waitFile(t *testing.T, path string, p *proc) {
	t.Helper()
	relocktest.Eventually(t, 15*time.Second, path+" to appear", func() bool {
		if _, err := os.Stat(path); err == nil {
			return true
		}
		select {
		case <-p.done:
			out, errOut := p.output()
			t.Fatalf("relock ended before %s appeared\nstdout:\n%s\nstderr:\n%s", path, out, errOut)
		default:
		}
		return false
	})
}
