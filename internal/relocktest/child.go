package relocktest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// A child is the test binary run again as a process of its own, running
// one test function (which skips unless its environment says it is a
// child): the way to have a real process hold or wait for a lock and then
// die by SIGKILL, with no chance to clean up. The child talks back in
// lines on its standard output (ChildSay), and ends by itself when its
// standard input closes (the parent died or killed it) or after
// ChildMaxLife.

// childPrefix marks the child's lines among whatever else the test binary
// prints.
const childPrefix = "relocktest-child: "

// ChildMaxLife bounds a child's life if nobody kills it.
const ChildMaxLife = time.Minute

// Child is a child process started by StartChild.
type Child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr lockedBuffer
	done   chan struct{} // closed when the process has been waited for
	err    error         // its exit status, once done is closed
	once   sync.Once
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil // enough to tell what went wrong
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// StartChild runs the test binary again with only the test function test
// (an exact name) and env added to its environment.
func StartChild(test string, env ...string) (*Child, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout="+(ChildMaxLife+time.Minute).String())
	cmd.Env = append(os.Environ(), env...)
	c := &Child{cmd: cmd, lines: make(chan string, 64), done: make(chan struct{})}
	cmd.Stderr = &c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), childPrefix); ok {
				select {
				case c.lines <- line:
				default: // nobody reads: the line is not needed
				}
			}
		}
	}()
	go func() {
		<-read // Wait closes stdout: read it all first
		c.err = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

// Pid is the child's process ID.
func (c *Child) Pid() int { return c.cmd.Process.Pid }

// Line returns the child's next line, waiting up to timeout.
func (c *Child) Line(timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case line, ok := <-c.lines:
		if !ok {
			<-c.done
			return "", fmt.Errorf("child %d ended (%v); its stderr:\n%s", c.Pid(), c.err, c.Stderr())
		}
		return line, nil
	case <-t.C:
		return "", fmt.Errorf("no line from child %d within %v; its stderr:\n%s", c.Pid(), timeout, c.Stderr())
	}
}

// Expect waits up to timeout for a line starting with prefix, skipping
// others, and returns the rest of it.
func (c *Child) Expect(prefix string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		line, err := c.Line(time.Until(deadline))
		if err != nil {
			return "", err
		}
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			return strings.TrimSpace(rest), nil
		}
		if strings.HasPrefix(line, "error ") {
			return "", errors.New("child: " + line)
		}
	}
}

// Kill ends the child with SIGKILL, as a crash would, and waits for it.
// It is safe to call more than once.
func (c *Child) Kill() {
	c.once.Do(func() {
		_ = c.cmd.Process.Kill()
		_ = c.stdin.Close()
	})
	<-c.done
}

// Stop stops the child with SIGSTOP, and waits until every thread of it
// has stopped (the signal is delivered after kill returns): from then on
// it sends nothing, and what it sent before is with the server's kernel.
// Kill ends a stopped child too.
func (c *Child) Stop(t testing.TB) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP child %d: %v", c.Pid(), err)
	}
	Eventually(t, 10*time.Second, "the child to stop", func() bool { return stopped(c.Pid()) })
}

// stopped reports whether every thread of pid is stopped, as /proc says.
func stopped(pid int) bool {
	stats, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// "tid (comm) S ...": comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// Stderr is what the child wrote on its standard error (the start of it).
func (c *Child) Stderr() string { return c.stderr.String() }

// ChildSay writes a line for the parent (in the child).
func ChildSay(format string, args ...any) {
	fmt.Fprintf(os.Stdout, childPrefix+format+"\n", args...)
}

// ChildWait blocks, in the child, until the parent closes the child's
// standard input (or dies), or ChildMaxLife has passed.
func ChildWait() {
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	t := time.NewTimer(ChildMaxLife)
	defer t.Stop()
	select {
	case <-eof:
	case <-t.C:
	}
}
