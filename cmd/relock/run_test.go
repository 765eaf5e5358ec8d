package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/internal/relocktest"
	"github.com/relock-go/relock/rlock"
)

func TestRunExitsWithCommandCode(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	for _, tc := range []struct {
		name    string
		command []string
		want    int
	}{
		{"zero", []string{"sh", "-c", "exit 0"}, 0},
		{"three", []string{"sh", "-c", "exit 3"}, 3},
		{"killed by SIGKILL", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9},
		{"not found", []string{"relock-no-such-command"}, exitNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := relocktest.Name(t)
			r := relock(t, append([]string{"run", "--redis", srv.Addr, name, "--"}, tc.command...)...)
			wantCode(t, r, tc.want)
			locked, err := c.GetLock(name).IsLocked(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if locked {
				t.Errorf("lock %q still held after relock ended", name)
			}
		})
	}
}

func TestRunFlagsAfterName(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	r := relock(t, "run", name, "--redis", srv.Addr, "--wait", "1s", "sh", "-c", "echo ran")
	wantCode(t, r, 0)
	if got, want := r.stdout, "ran\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
}

// TestRunNoOverlap runs several relock run of one name at once; each
// command appends "start <ns>" and "end <ns>" to one file. The lock must
// make the intervals follow one another.
func TestRunNoOverlap(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	log := filepath.Join(t.TempDir(), "log")
	script := `echo "start $(date +%s%N)" >> "$0"; sleep 0.15; echo "end $(date +%s%N)" >> "$0"`
	const runs = 3
	procs := make([]*proc, runs)
	for i := range procs {
		procs[i] = startRelock(t, "run", "--redis", srv.Addr, name, "--", "sh", "-c", script, log)
	}
	for _, p := range procs {
		wantCode(t, p.wait(30*time.Second), 0)
	}

	data, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if got, want := len(lines), 2*runs; got != want {
		t.Fatalf("log has %d lines, want %d:\n%s", got, want, data)
	}
	type span struct{ start, end int64 }
	var spans []span
	for i := 0; i < len(lines); i += 2 {
		s, errS := parseStamp(lines[i], "start")
		e, errE := parseStamp(lines[i+1], "end")
		if errS != nil || errE != nil {
			t.Fatalf("log is not start/end pairs in turn (commands overlapped?):\n%s", data)
		}
		spans = append(spans, span{s, e})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		if spans[i].start < spans[i-1].end {
			t.Errorf("command %d started %v before command %d ended", i, time.Duration(spans[i-1].end-spans[i].start), i-1)
		}
	}
}

func parseStamp(line, word string) (int64, error) {
	rest, ok := strings.CutPrefix(line, word+" ")
	if !ok {
		return 0, errors.New("no " + word)
	}
	return strconv.ParseInt(rest, 10, 64)
}

func TestRunWaitEndsWithTempFail(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c.GetLock(name)
	if err := l.Lock(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(holder) })
	marker := filepath.Join(t.TempDir(), "ran")

	for _, wait := range []string{"200ms", "0"} {
		t.Run("wait="+wait, func(t *testing.T) {
			r := relock(t, "run", "--redis", srv.Addr, "--wait", wait, name, "--", "touch", marker)
			wantCode(t, r, exitTempFail)
			if wait == "200ms" && r.took < 200*time.Millisecond {
				t.Errorf("relock gave up after %v, want at least 200ms", r.took)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command ran although the lock was held")
			}
			if !strings.Contains(r.stderr, "held by another owner") {
				t.Errorf("stderr = %q, want it to say the lock is held", r.stderr)
			}
		})
	}
}

// TestRunSIGTERMReleases sends SIGTERM to relock while its command runs:
// the command gets it, and once relock has exited the lock is free at once,
// not after its lease.
func TestRunSIGTERMReleases(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := `trap 'echo TERM > "$1"; kill $s; exit 7' TERM; sleep 30 & s=$!; : > "$0"; wait $s`
	p := startRelock(t, "run", "--redis", srv.Addr, name, "--", "sh", "-c", script, ready, got)
	waitFile(t, ready, p)
	if locked, err := c.GetLock(name).IsLocked(t.Context()); err != nil || !locked {
		t.Fatalf("IsLocked while the command runs = %v, %v; want true", locked, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	r := p.wait(10 * time.Second)
	wantCode(t, r, 7)
	locked, err := c.GetLock(name).IsLocked(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if locked {
		t.Errorf("lock still held right after relock exited")
	}
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "TERM" {
		t.Errorf("the command did not get SIGTERM (marker: %q, %v)", b, err)
	}
}

// TestRunSignalWhileWaiting interrupts relock while it waits: the command
// never runs and relock exits 128+SIGINT.
func TestRunSignalWhileWaiting(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c.GetLock(name)
	if err := l.Lock(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(holder) })
	marker := filepath.Join(t.TempDir(), "ran")
	p := startRelock(t, "run", "--redis", srv.Addr, name, "--", "touch", marker)

	// relock waits once it has subscribed to the lock's channel.
	rdb := relocktest.Raw(t)
	relocktest.Eventually(t, 15*time.Second, "relock to subscribe", func() bool {
		m, err := rdb.Do(t.Context(), rdb.B().PubsubNumsub().Channel(lockcore.Channel(name)).Build()).AsIntMap()
		return err == nil && m[lockcore.Channel(name)] > 0
	})
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	wantCode(t, p.wait(10*time.Second), 128+int(syscall.SIGINT))
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the command ran although relock was interrupted while waiting")
	}
}

// TestRunLockLost deletes the lock while the command runs: relock stops
// the command with SIGTERM and exits 70.
func TestRunLockLost(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := `trap 'echo TERM > "$1"; kill $s; exit 0' TERM; sleep 30 & s=$!; : > "$0"; wait $s`
	p := startRelock(t, "run", "--redis", srv.Addr, "--watchdog", "300ms", name, "--", "sh", "-c", script, ready, got)
	waitFile(t, ready, p)
	if held, err := c.GetLock(name).ForceUnlock(t.Context()); err != nil || !held {
		t.Fatalf("ForceUnlock = %v, %v; want true", held, err)
	}
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitLockLost)
	if !strings.Contains(r.stderr, "lost") || !strings.Contains(r.stderr, "SIGTERM") {
		t.Errorf("stderr does not tell of the loss and the SIGTERM:\n%s", r.stderr)
	}
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "TERM" {
		t.Errorf("the command did not get SIGTERM (marker: %q, %v)", b, err)
	}
}

// TestRunLockLostKill: a command that ignores SIGTERM is killed after
// --grace.
func TestRunLockLostKill(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	ready := filepath.Join(t.TempDir(), "ready")
	script := `trap '' TERM; : > "$0"; exec sleep 30`
	p := startRelock(t, "run", "--redis", srv.Addr, "--watchdog", "300ms", "--grace", "200ms", name, "--", "sh", "-c", script, ready)
	waitFile(t, ready, p)
	if _, err := c.GetLock(name).ForceUnlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitLockLost)
	if !strings.Contains(r.stderr, "SIGKILL") {
		t.Errorf("stderr does not tell of the SIGKILL:\n%s", r.stderr)
	}
}

func TestRunRedisUnavailable(t *testing.T) {
	r := relock(t, "run", "--redis", "127.0.0.1:1", "some-lock", "--", "true")
	wantCode(t, r, exitUnavailable)
	if !strings.Contains(r.stderr, "127.0.0.1:1") {
		t.Errorf("stderr = %q, want it to name the address", r.stderr)
	}
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		want   int
		stdout string // substring of stdout
	}{
		{nil, exitUsage, ""},
		{[]string{"--help"}, exitOK, "Commands:"},
		{[]string{"help", "status"}, exitOK, "status [--json] NAME"},
		{[]string{"-h"}, exitOK, "Connection flags"},
		{[]string{"--no-such-flag", "status"}, exitUsage, ""},
		{[]string{"no-such-command"}, exitUsage, ""},
		{[]string{"run", "--help"}, exitOK, "run [-n|--no-wait]"},
		{[]string{"version", "--help"}, exitOK, "Usage: relock version"},
		{[]string{"version", "x"}, exitUsage, ""},
		{[]string{"status", "-h"}, exitOK, "--json"},
		{[]string{"unlock", "--help"}, exitOK, "--force"},
		{[]string{"demo", "--help"}, exitOK, "--workers"},
		{[]string{"run", "name-only"}, exitUsage, ""},
		{[]string{"run", "--wait", "soon", "x", "--", "true"}, exitUsage, ""},
		{[]string{"run", "--watchdog", "1ms", "x", "--", "true"}, exitUsage, ""},
		{[]string{"run", "--fair", "--fenced", "x", "--", "true"}, exitUsage, ""},
		{[]string{"run", "-n", "--wait", "1s", "x", "--", "true"}, exitUsage, ""},
		{[]string{"--cert", "c.pem", "status", "x"}, exitUsage, ""},
		{[]string{"status", "--redis", "redis://h:x", "x"}, exitUsage, ""},
		{[]string{"status"}, exitUsage, ""},
		{[]string{"status", "a", "b"}, exitUsage, ""},
		{[]string{"unlock", "x"}, exitUsage, ""},
		{[]string{"demo", "--workers", "0"}, exitUsage, ""},
	} {
		t.Run(strings.Join(tc.args, "_"), func(t *testing.T) {
			r := relock(t, tc.args...)
			wantCode(t, r, tc.want)
			if !strings.Contains(r.stdout, tc.stdout) {
				t.Errorf("stdout does not contain %q:\n%s", tc.stdout, r.stdout)
			}
			if tc.want == exitUsage && r.stderr == "" {
				t.Errorf("nothing on stderr for a usage error")
			}
		})
	}
}

// TestErrorPrefixedOnce: an error of the library, which carries "relock: "
// already, is printed with the prefix once.
func TestErrorPrefixedOnce(t *testing.T) {
	r := relock(t, "run", "", "--", "true")
	wantCode(t, r, exitUsage)
	if first, _, _ := strings.Cut(r.stderr, "\n"); first != "relock: invalid argument: empty lock name" {
		t.Errorf("first line of stderr = %q, want %q", first, "relock: invalid argument: empty lock name")
	}
}

// TestRunEnvironment checks RELOCK_NAME and RELOCK_OWNER (the hash field
// that holds the lock while the command runs), and that a RELOCK_TOKEN
// from outside does not reach a command of a lock that is not fenced.
func TestRunEnvironment(t *testing.T) {
	srv := server(t)
	rdb := relocktest.Raw(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	out, ready, proceed := filepath.Join(dir, "env"), filepath.Join(dir, "ready"), fifo(t, dir)
	script := `printf '%s\n%s\n%s\n' "$RELOCK_NAME" "$RELOCK_OWNER" "${RELOCK_TOKEN-unset}" > "$0"; : > "$1"; read x < "$2"`
	p := startRelockWith(t, procOptions{env: []string{"RELOCK_TOKEN=17", "RELOCK_NAME=outer"}},
		"run", "--redis", srv.Addr, name, "--", "sh", "-c", script, out, ready, proceed)
	waitFile(t, ready, p)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("the command printed %q", b)
	}
	if lines[0] != name {
		t.Errorf("RELOCK_NAME = %q, want %q", lines[0], name)
	}
	host, _ := os.Hostname()
	if want := fmt.Sprintf(":run:%s:%d", host, p.cmd.Process.Pid); !strings.HasSuffix(lines[1], want) {
		t.Errorf("RELOCK_OWNER = %q, want <clientID>%s", lines[1], want)
	}
	if fields := relocktest.HGetAll(t, rdb, name); len(fields) != 1 || fields[lines[1]] != "1" {
		t.Errorf("lock hash = %v, want only the field RELOCK_OWNER %q, hold count 1", fields, lines[1])
	}
	if lines[2] != "unset" {
		t.Errorf("RELOCK_TOKEN = %q without --fenced, want it unset", lines[2])
	}
	release(t, proceed)
	wantCode(t, p.wait(10*time.Second), 0)
}

// TestRunFencedToken runs twice with --fenced: each command gets a token,
// the second greater than the first, even though the lock key is gone
// between the runs.
func TestRunFencedToken(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	var tokens []int64
	for range 2 {
		r := relock(t, "run", "--fenced", "--redis", srv.Addr, name, "--", "sh", "-c", `echo "$RELOCK_TOKEN"`)
		wantCode(t, r, 0)
		n, err := strconv.ParseInt(strings.TrimSpace(r.stdout), 10, 64)
		if err != nil {
			t.Fatalf("RELOCK_TOKEN = %q: %v", r.stdout, err)
		}
		tokens = append(tokens, n)
	}
	if tokens[0] < 1 || tokens[1] <= tokens[0] {
		t.Errorf("tokens = %v, want positive and strictly increasing", tokens)
	}
}

// TestRunNoWait: -n and --no-wait try once and exit 75 when the lock is
// held, without running the command.
func TestRunNoWait(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c.GetLock(name)
	if err := l.Lock(holder); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Unlock(holder) })
	marker := filepath.Join(t.TempDir(), "ran")
	for _, flag := range []string{"-n", "--no-wait"} {
		t.Run(flag, func(t *testing.T) {
			r := relock(t, "run", flag, "--redis", srv.Addr, name, "--", "touch", marker)
			wantCode(t, r, exitTempFail)
			if _, err := os.Stat(marker); err == nil {
				t.Errorf("the command ran although the lock was held")
			}
		})
	}
}

// TestRunLockDeletedNoticed deletes the lock key (no unlock message, no
// force-unlock) while the command runs, with run's default lease: a
// renewal (every 800ms) finds the hold gone, relock stops the command and
// exits 70, all in under a second.
func TestRunLockDeletedNoticed(t *testing.T) {
	srv := server(t)
	rdb := relocktest.Raw(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := `trap 'echo TERM > "$1"; kill $s; exit 0' TERM; sleep 30 & s=$!; : > "$0"; wait $s`
	p := startRelock(t, "run", "--redis", srv.Addr, name, "--", "sh", "-c", script, ready, got)
	waitFile(t, ready, p)
	deleted := time.Now()
	if n, err := rdb.Do(t.Context(), rdb.B().Del().Key(name).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("DEL = %d, %v; want 1", n, err)
	}
	r := p.wait(10 * time.Second)
	took := time.Since(deleted)
	wantCode(t, r, exitLockLost)
	t.Logf("relock exited %v after the DEL", took)
	if took >= time.Second {
		t.Errorf("relock exited %v after the DEL, want under 1s\nstderr:\n%s", took, r.stderr)
	}
	if !strings.Contains(r.stderr, "lost") {
		t.Errorf("stderr does not tell of the loss:\n%s", r.stderr)
	}
	if b, err := os.ReadFile(got); err != nil || strings.TrimSpace(string(b)) != "TERM" {
		t.Errorf("the command did not get SIGTERM (marker: %q, %v)", b, err)
	}
}

// TestRunLockGoneAtRelease deletes the lock while the command runs, on a
// lease long enough that no renewal notices before the command ends: the
// release finds it gone, and relock exits 70 and says when.
func TestRunLockGoneAtRelease(t *testing.T) {
	srv := server(t)
	rdb := relocktest.Raw(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, proceed := filepath.Join(dir, "ready"), fifo(t, dir)
	p := startRelock(t, "run", "--redis", srv.Addr, "--watchdog", "60s", name, "--", "sh", "-c", `: > "$0"; read x < "$1"`, ready, proceed)
	waitFile(t, ready, p)
	if err := rdb.Do(t.Context(), rdb.B().Del().Key(name).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	release(t, proceed)
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitLockLost)
	for _, want := range []string{"already gone", "found at release", "exit status 0"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
		}
	}
}
