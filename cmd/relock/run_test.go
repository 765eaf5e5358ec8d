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

	"github.com/redis/rueidis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/relock-go/relock/internal/layout"
	"github.com/relock-go/relock/internal/redistest"
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
			require.NoError(t, err)
			assert.False(t, locked, "lock %q still held after relock ended", name)
		})
	}
}

func TestRunFlagsAfterName(t *testing.T) {
	srv := server(t)
	name := relocktest.Name(t)
	r := relock(t, "run", name, "--redis", srv.Addr, "--wait", "1s", "sh", "-c", "echo ran")
	wantCode(t, r, 0)
	assert.Equal(t, "ran\n", r.stdout, "stdout")
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
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.Len(t, lines, 2*runs, "log:\n%s", data)
	type span struct{ start, end int64 }
	var spans []span
	for i := 0; i < len(lines); i += 2 {
		s, errS := parseStamp(lines[i], "start")
		e, errE := parseStamp(lines[i+1], "end")
		require.NoError(t, errors.Join(errS, errE), "log is not start/end pairs in turn (commands overlapped?):\n%s", data)
		spans = append(spans, span{s, e})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start < spans[j].start })
	for i := 1; i < len(spans); i++ {
		assert.GreaterOrEqual(t, spans[i].start, spans[i-1].end, "command %d started %v before command %d ended",
			i, time.Duration(spans[i-1].end-spans[i].start), i-1)
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
	require.NoError(t, l.Lock(holder))
	t.Cleanup(func() { _ = l.Unlock(holder) })
	marker := filepath.Join(t.TempDir(), "ran")

	for _, wait := range []string{"200ms", "0"} {
		t.Run("wait="+wait, func(t *testing.T) {
			r := relock(t, "run", "--redis", srv.Addr, "--wait", wait, name, "--", "touch", marker)
			wantCode(t, r, exitTempFail)
			if wait == "200ms" {
				assert.GreaterOrEqual(t, r.took, 200*time.Millisecond, "relock gave up too soon")
			}
			assert.NoFileExists(t, marker, "the command ran although the lock was held")
			assert.Contains(t, r.stderr, "held by another owner", "stderr")
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
	script := `trap 'echo TERM > "$1"; kill $s; exit 7' TERM; sleep 30 & s=$!; echo ready > "$0"; wait $s`
	p := startRelock(t, "run", "--redis", srv.Addr, name, "--", "sh", "-c", script, ready, got)
	waitReady(t, ready, p)
	locked, err := c.GetLock(name).IsLocked(t.Context())
	require.NoError(t, err)
	require.True(t, locked, "IsLocked while the command runs")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	r := p.wait(10 * time.Second)
	wantCode(t, r, 7)
	locked, err = c.GetLock(name).IsLocked(t.Context())
	require.NoError(t, err)
	assert.False(t, locked, "lock still held right after relock exited")
	wantMarker(t, got, "TERM", "the command's SIGTERM marker")
}

// TestRunSignalWhileWaiting interrupts relock while it waits: the command
// never runs and relock exits 128+SIGINT.
func TestRunSignalWhileWaiting(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c.GetLock(name)
	require.NoError(t, l.Lock(holder))
	t.Cleanup(func() { _ = l.Unlock(holder) })
	marker := filepath.Join(t.TempDir(), "ran")
	p := startRelock(t, "run", "--redis", srv.Addr, name, "--", "touch", marker)

	// relock waits once it has subscribed to the lock's channel.
	rdb := relocktest.Raw(t)
	waitUntil(t, 15*time.Second, "relock to subscribe", func() (bool, error) {
		m, err := rdb.Do(t.Context(), rdb.B().PubsubNumsub().Channel(layout.Channel(name)).Build()).AsIntMap()
		return m[layout.Channel(name)] > 0, err
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGINT))
	wantCode(t, p.wait(10*time.Second), 128+int(syscall.SIGINT))
	assert.NoFileExists(t, marker, "the command ran although relock was interrupted while waiting")
}

// TestRunLockLost deletes the lock while the command runs: relock stops
// the command with SIGTERM and exits 70.
func TestRunLockLost(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	dir := t.TempDir()
	ready, got := filepath.Join(dir, "ready"), filepath.Join(dir, "got")
	script := `trap 'echo TERM > "$1"; kill $s; exit 0' TERM; sleep 30 & s=$!; echo ready > "$0"; wait $s`
	p := startRelock(t, "run", "--redis", srv.Addr, "--watchdog", "300ms", name, "--", "sh", "-c", script, ready, got)
	waitReady(t, ready, p)
	held, err := c.GetLock(name).ForceUnlock(t.Context())
	require.NoError(t, err)
	require.True(t, held, "ForceUnlock")
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitLockLost)
	assert.Contains(t, r.stderr, "lost", "stderr does not tell of the loss")
	assert.Contains(t, r.stderr, "SIGTERM", "stderr does not tell of the SIGTERM")
	wantMarker(t, got, "TERM", "the command's SIGTERM marker")
}

// TestRunLockLostKill: a command that ignores SIGTERM is killed after
// --grace.
func TestRunLockLostKill(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	ready := filepath.Join(t.TempDir(), "ready")
	script := `trap '' TERM; echo ready > "$0"; exec sleep 30`
	p := startRelock(t, "run", "--redis", srv.Addr, "--watchdog", "300ms", "--grace", "200ms", name, "--", "sh", "-c", script, ready)
	waitReady(t, ready, p)
	_, err := c.GetLock(name).ForceUnlock(t.Context())
	require.NoError(t, err)
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitLockLost)
	assert.Contains(t, r.stderr, "SIGKILL", "stderr does not tell of the SIGKILL")
}

func TestRunRedisUnavailable(t *testing.T) {
	r := relock(t, "run", "--redis", "127.0.0.1:1", "some-lock", "--", "true")
	wantCode(t, r, exitUnavailable)
	assert.Contains(t, r.stderr, "127.0.0.1:1", "stderr does not name the address")
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
			assert.Contains(t, r.stdout, tc.stdout, "stdout")
			if tc.want == exitUsage {
				assert.NotEmpty(t, r.stderr, "nothing on stderr for a usage error")
			}
		})
	}
}

// TestErrorPrefixedOnce: an error of the library, which carries "relock: "
// already, is printed with the prefix once.
func TestErrorPrefixedOnce(t *testing.T) {
	r := relock(t, "run", "", "--", "true")
	wantCode(t, r, exitUsage)
	first, _, _ := strings.Cut(r.stderr, "\n")
	assert.Equal(t, "relock: invalid argument: empty lock name", first, "first line of stderr")
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
	script := `printf '%s\n%s\n%s\n' "$RELOCK_NAME" "$RELOCK_OWNER" "${RELOCK_TOKEN-unset}" > "$0"; echo ready > "$1"; read x < "$2"`
	p := startRelockWith(t, procOptions{env: []string{"RELOCK_TOKEN=17", "RELOCK_NAME=outer"}},
		"run", "--redis", srv.Addr, name, "--", "sh", "-c", script, out, ready, proceed)
	waitReady(t, ready, p)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	require.Len(t, lines, 3, "the command printed %q", b)
	assert.Equal(t, name, lines[0], "RELOCK_NAME")
	host, _ := os.Hostname()
	assert.True(t, strings.HasSuffix(lines[1], fmt.Sprintf(":run:%s:%d", host, p.cmd.Process.Pid)),
		"RELOCK_OWNER = %q, want <clientID>:run:%s:%d", lines[1], host, p.cmd.Process.Pid)
	assert.Equal(t, map[string]string{lines[1]: "1"}, relocktest.HGetAll(t, rdb, name), "lock hash: only the field RELOCK_OWNER, hold count 1")
	assert.Equal(t, "unset", lines[2], "RELOCK_TOKEN without --fenced")
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
		require.NoError(t, err, "RELOCK_TOKEN = %q", r.stdout)
		tokens = append(tokens, n)
	}
	assert.Positive(t, tokens[0], "first token")
	assert.Greater(t, tokens[1], tokens[0], "tokens must increase")
}

// TestRunNoWait: -n and --no-wait try once and exit 75 when the lock is
// held, without running the command.
func TestRunNoWait(t *testing.T) {
	srv := server(t)
	c := relocktest.Client(t)
	name := relocktest.Name(t)
	holder := rlock.WithOwner(t.Context(), "holder")
	l := c.GetLock(name)
	require.NoError(t, l.Lock(holder))
	t.Cleanup(func() { _ = l.Unlock(holder) })
	marker := filepath.Join(t.TempDir(), "ran")
	for _, flag := range []string{"-n", "--no-wait"} {
		t.Run(flag, func(t *testing.T) {
			r := relock(t, "run", flag, "--redis", srv.Addr, name, "--", "touch", marker)
			wantCode(t, r, exitTempFail)
			assert.NoFileExists(t, marker, "the command ran although the lock was held")
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
	script := `trap 'echo TERM > "$1"; kill $s; exit 0' TERM; sleep 30 & s=$!; echo ready > "$0"; wait $s`
	p := startRelock(t, "run", "--redis", srv.Addr, name, "--", "sh", "-c", script, ready, got)
	waitReady(t, ready, p)
	deleted := time.Now()
	n, err := rdb.Do(t.Context(), rdb.B().Del().Key(name).Build()).AsInt64()
	require.NoError(t, err)
	require.EqualValues(t, 1, n, "keys DEL removed")
	r := p.wait(10 * time.Second)
	took := time.Since(deleted)
	wantCode(t, r, exitLockLost)
	t.Logf("relock exited %v after the DEL", took)
	assert.Less(t, took, time.Second, "relock's exit after the DEL\nstderr:\n%s", r.stderr)
	assert.Contains(t, r.stderr, "lost", "stderr does not tell of the loss")
	wantMarker(t, got, "TERM", "the command's SIGTERM marker")
}

// TestRunLockGoneAtRelease deletes the lock while the command runs, on a
// lease long enough that no renewal notices before the command ends: the
// release finds it gone, and relock exits 70 and says when.
//
// The hold's watch (Done) subscribes to the lock's channel without waiting,
// and checks the hold once the subscription is confirmed (a force-unlock
// published before it would be missed otherwise); that confirmation may
// come after the command has started. The DEL waits for that check (the
// second PEXPIRE of the key, after the acquisition's, seen by keyspace
// notifications): a DEL before it is found by the check, while the
// command runs (TestRunLockDeletedNoticed's path), not at the release.
func TestRunLockGoneAtRelease(t *testing.T) {
	srv := redistest.Start(t, "--notify-keyspace-events", "Kg")
	rdb := srv.Client(t)
	name := relocktest.Name(t)
	expires := keyEvents(t, rdb, name, "expire")
	dir := t.TempDir()
	ready, proceed := filepath.Join(dir, "ready"), fifo(t, dir)
	p := startRelock(t, "run", "--redis", srv.Addr, "--watchdog", "60s", name, "--", "sh", "-c", `echo ready > "$0"; read x < "$1"`, ready, proceed)
	waitReady(t, ready, p)
	relocktest.Receive(t, expires, 10*time.Second, "the acquisition's PEXPIRE")
	relocktest.Receive(t, expires, 10*time.Second, "the check of the hold once its watch is subscribed")
	require.NoError(t, rdb.Do(t.Context(), rdb.B().Del().Key(name).Build()).Error())
	release(t, proceed)
	r := p.wait(10 * time.Second)
	wantCode(t, r, exitLockLost)
	for _, want := range []string{"already gone", "found at release", "exit status 0"} {
		assert.Contains(t, r.stderr, want, "stderr")
	}
}

// keyEvents subscribes to the keyspace notifications of key (the server
// must send them) and returns a channel that gets one value per event
// named event, from the subscription's confirmation on.
func keyEvents(t *testing.T, rdb rueidis.Client, key, event string) <-chan struct{} {
	t.Helper()
	events := make(chan struct{}, 64)
	dc, cancel := rdb.Dedicate()
	t.Cleanup(cancel)
	dc.SetPubSubHooks(rueidis.PubSubHooks{OnMessage: func(m rueidis.PubSubMessage) {
		if m.Message == event {
			select {
			case events <- struct{}{}:
			default:
			}
		}
	}})
	require.NoError(t, dc.Do(t.Context(), dc.B().Subscribe().Channel("__keyspace@0__:"+key).Build()).Error())
	return events
}

// wantMarker checks the content of a file a command wrote before it ended.
func wantMarker(t *testing.T, path, want, what string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if assert.NoError(t, err, what) {
		assert.Equal(t, want, strings.TrimSpace(string(b)), what)
	}
}
