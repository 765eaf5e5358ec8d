package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/relock-go/relock/internal/lockcore"
	"github.com/relock-go/relock/latch"
	"github.com/relock-go/relock/rwlock"
	"github.com/relock-go/relock/semaphore"
)

const statusUsage = `Usage: relock [CONNECTION FLAGS] status [--json] NAME
       relock [CONNECTION FLAGS] status [--json] --kind KIND NAME

Show what Redis holds about the lock (or synchronizer) NAME, read in one
transaction. KIND is what NAME is; by default it is told from the keys:

  lock       a lock, fair lock or fenced lock: its holders (hash field
             <clientID>:<owner> and hold count), its remaining lease, a fair
             lock's waiter queue (position, field, and the deadline by which
             the waiter must refresh its place, counted on the server's
             clock), and the fencing counter (the last token handed out).
  rwlock     a read-write lock (its hash has a "mode" field): the mode, the
             writer, the readers with their hold counts and the remaining
             lease of each read level's key.
  semaphore  a semaphore (a count, with a lease set {NAME}:timeout): the
             permits available, the permits held with their lease, and the
             waiters queued.
  latch      a count-down latch (a count): the count.

A count without a lease set is either a semaphore with no permit held or
a latch; it is shown as both unless --kind says which.

--json prints one object. For a lock, with these stable fields:
  name, locked, lease_remaining_ms (0: free, -1: no expiry),
  holders[]{field, client_id, owner, hold_count},
  queue[]{position, field, client_id, owner, deadline_ms, remaining_ms},
  fencing_counter (null if never used), server_time_ms,
  keys{lock, queue, timeout, token, channel}
For the others, "kind" ("rwlock", "semaphore", "latch", or "counter" for a
count that may be either of the last two) and:
  rwlock:    name, locked, mode ("read", "write", "" when free),
             lease_remaining_ms, writer{field, client_id, owner, hold_count}
             (null when none), readers[]{field, client_id, owner, hold_count,
             levels[]{level, key, remaining_ms (-2: the key is gone)}},
             keys{lock, channel}
  semaphore: name, set (false: never set), available,
             held[]{permit_id, lease_end_ms, remaining_ms (null: no lease)},
             queue[]{position, permit_id, joined_ms, deadline_ms},
             server_time_ms, keys{available, leases, channel, queue,
             queue_timeout}
  latch:     name, count, open, keys{count, channel}
  counter:   name, value, keys{count}

Exit codes: 0 (whether or not the lock is held), 1 the key is none of
these, 64 bad command line, 69 Redis could not be reached (or refused the
password, or TLS failed).`

func (cl *cli) status(args []string) int {
	fs := cl.newConnFlagSet("status", statusUsage)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	kind := fs.String("kind", "auto", "what NAME is: auto, lock, rwlock, semaphore or latch")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return cl.usageError(fs, "status needs exactly one lock NAME (got %d arguments)", len(pos))
	}
	name := pos[0]
	if err := lockcore.CheckName(name); err != nil {
		return cl.usageError(fs, "%v", err)
	}
	if !slices.Contains([]string{"auto", "lock", "rwlock", "semaphore", "latch"}, *kind) {
		return cl.usageError(fs, "unknown --kind %q (auto, lock, rwlock, semaphore or latch)", *kind)
	}
	rdb, _, code := cl.connect()
	if code >= 0 {
		return code
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *kind == "auto" {
		k, err := detectKind(ctx, rdb, name)
		if err != nil {
			return cl.errorf(exitUnavailable, "%v", err)
		}
		*kind = k
	}
	if *kind != "lock" {
		return cl.syncStatus(ctx, rdb, name, *kind, *asJSON)
	}
	st, err := readLockState(ctx, rdb, name)
	if err != nil {
		if errors.Is(err, errNotALock) {
			return cl.errorf(exitFailure, "%v", err)
		}
		return cl.errorf(exitUnavailable, "%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(cl.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return cl.errorf(exitFailure, "%v", err)
		}
		return exitOK
	}
	writeStatus(cl.stdout, st)
	return exitOK
}

// writeStatus prints st for people.
func writeStatus(w io.Writer, st *lockState) {
	var b strings.Builder
	switch {
	case !st.Locked:
		fmt.Fprintf(&b, "lock %q: free\n", st.Name)
	case st.LeaseRemainingMs < 0:
		fmt.Fprintf(&b, "lock %q: held, no lease (the key never expires)\n", st.Name)
	default:
		fmt.Fprintf(&b, "lock %q: held, lease %s left\n", st.Name, ms(st.LeaseRemainingMs))
	}
	for _, h := range st.Holders {
		fmt.Fprintf(&b, "  holder %s  hold count %d\n", h.Field, h.HoldCount)
	}
	if len(st.Queue) == 0 {
		b.WriteString("fair queue: empty\n")
	} else {
		fmt.Fprintf(&b, "fair queue: %d waiting, head first\n", len(st.Queue))
		for _, q := range st.Queue {
			fmt.Fprintf(&b, "  %d. %s  ", q.Position, q.Field)
			switch {
			case q.RemainingMs == nil:
				b.WriteString("no deadline\n")
			case *q.RemainingMs >= 0:
				fmt.Fprintf(&b, "deadline in %s\n", ms(*q.RemainingMs))
			default:
				fmt.Fprintf(&b, "deadline passed %s ago (dropped when it reaches the head)\n", ms(-*q.RemainingMs))
			}
		}
	}
	if st.FencingCounter == nil {
		b.WriteString("fencing counter: none\n")
	} else {
		fmt.Fprintf(&b, "fencing counter: %d\n", *st.FencingCounter)
	}
	io.WriteString(w, b.String())
}

// ms formats a count of milliseconds for people: "950ms", "28.4s", "5m0s".
func ms(n int64) string {
	return human(time.Duration(n) * time.Millisecond)
}

// human rounds d for display: "0.42ms", "950ms", "28.4s".
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + human(-d)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}

// ---- read-write locks, semaphores and count-down latches ----

// detectKind tells from the keys what name is: "lock", "rwlock",
// "semaphore", "latch" (never: a count alone may be a semaphore too) or
// "counter" (a count without a lease set or a queue).
func detectKind(ctx context.Context, rdb rueidis.Client, name string) (string, error) {
	k := semaphore.KeysOf(name)
	b := rdb.B()
	replies := rdb.DoMulti(ctx,
		b.Multi().Build(),
		b.Type().Key(name).Build(),
		b.Exists().Key(k.Leases, k.Queue).Build(),
		b.Exec().Build(),
	)
	res, err := replies[len(replies)-1].ToArray()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("EXEC returned %d replies, want 2", len(res))
	}
	if err != nil {
		return "", fmt.Errorf("reading %q: %w", name, err)
	}
	typ, err1 := res[0].ToString()
	semKeys, err2 := res[1].AsInt64()
	if err := errors.Join(err1, err2); err != nil {
		return "", fmt.Errorf("reading %q: %w", name, err)
	}
	switch {
	case typ == "hash":
		mode, err := rdb.Do(ctx, b.Hexists().Key(name).Field("mode").Build()).AsInt64()
		if err != nil {
			return "", fmt.Errorf("reading %q: %w", name, err)
		}
		if mode == 1 {
			return "rwlock", nil
		}
	case semKeys > 0:
		return "semaphore", nil
	case typ == "string":
		return "counter", nil
	}
	return "lock", nil
}

// rwState is a read-write lock, as 'relock status --json' prints it.
type rwState struct {
	Name             string      `json:"name"`
	Kind             string      `json:"kind"`
	Locked           bool        `json:"locked"`
	Mode             string      `json:"mode"`
	LeaseRemainingMs int64       `json:"lease_remaining_ms"`
	Writer           *holderInfo `json:"writer"`
	Readers          []rwReader  `json:"readers"`
	Keys             struct {
		Lock    string `json:"lock"`
		Channel string `json:"channel"`
	} `json:"keys"`
}

type rwReader struct {
	holderInfo
	Levels []rwLevel `json:"levels"`
}

type rwLevel struct {
	Level       int    `json:"level"`
	Key         string `json:"key"`
	RemainingMs int64  `json:"remaining_ms"`
}

// semState is a semaphore, as 'relock status --json' prints it.
type semState struct {
	Name         string      `json:"name"`
	Kind         string      `json:"kind"`
	Set          bool        `json:"set"`
	Available    int64       `json:"available"`
	Held         []semPermit `json:"held"`
	Queue        []semWaiter `json:"queue"`
	ServerTimeMs int64       `json:"server_time_ms"`
	Keys         struct {
		Available    string `json:"available"`
		Leases       string `json:"leases"`
		Channel      string `json:"channel"`
		Queue        string `json:"queue"`
		QueueTimeout string `json:"queue_timeout"`
	} `json:"keys"`
}

type semPermit struct {
	PermitID    string `json:"permit_id"`
	LeaseEndMs  *int64 `json:"lease_end_ms"`
	RemainingMs *int64 `json:"remaining_ms"`
}

type semWaiter struct {
	Position   int    `json:"position"`
	PermitID   string `json:"permit_id"`
	JoinedMs   int64  `json:"joined_ms"`
	DeadlineMs *int64 `json:"deadline_ms"`
}

// latchState is a count-down latch (or, as kind "counter", a count that
// may be a semaphore's).
type latchState struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Count *int64 `json:"count,omitempty"`
	Open  *bool  `json:"open,omitempty"`
	Value *int64 `json:"value,omitempty"`
	Keys  struct {
		Count   string `json:"count"`
		Channel string `json:"channel,omitempty"`
	} `json:"keys"`
}

// syncStatus shows a read-write lock, a semaphore, a latch or a count.
func (cl *cli) syncStatus(ctx context.Context, rdb rueidis.Client, name, kind string, asJSON bool) int {
	var (
		st    any
		write func(io.Writer)
		err   error
	)
	switch kind {
	case "rwlock":
		var rw *rwState
		rw, err = readRWState(ctx, rdb, name)
		st, write = rw, func(w io.Writer) { writeRW(w, rw) }
	case "semaphore":
		var sem *semState
		sem, err = readSemState(ctx, rdb, name)
		st, write = sem, func(w io.Writer) { writeSem(w, sem) }
	default: // latch, counter
		var l *latchState
		l, err = readLatchState(ctx, rdb, name, kind)
		st, write = l, func(w io.Writer) { writeLatch(w, l) }
	}
	if err != nil {
		if errors.Is(err, errNotALock) {
			return cl.errorf(exitFailure, "%v", err)
		}
		return cl.errorf(exitUnavailable, "%v", err)
	}
	if asJSON {
		enc := json.NewEncoder(cl.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return cl.errorf(exitFailure, "%v", err)
		}
		return exitOK
	}
	write(cl.stdout)
	return exitOK
}

// execAll runs cmds in one MULTI/EXEC and returns their replies.
func execAll(ctx context.Context, rdb rueidis.Client, name string, cmds ...rueidis.Completed) ([]rueidis.RedisMessage, error) {
	all := append(append([]rueidis.Completed{rdb.B().Multi().Build()}, cmds...), rdb.B().Exec().Build())
	replies := rdb.DoMulti(ctx, all...)
	for _, r := range replies[:len(replies)-1] {
		if err := r.Error(); err != nil {
			return nil, fmt.Errorf("reading %q: %w", name, err)
		}
	}
	res, err := replies[len(replies)-1].ToArray()
	if err == nil && len(res) != len(cmds) {
		err = fmt.Errorf("EXEC returned %d replies, want %d", len(res), len(cmds))
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q: %w", name, err)
	}
	return res, nil
}

// remaining turns a PTTL into a lease: 0 when the key is gone, -1 when it
// has no expiry.
func remaining(pttl int64) int64 {
	switch {
	case pttl == -2:
		return 0
	case pttl < 0:
		return -1
	}
	return pttl
}

// readRWState reads a read-write lock: its hash and lease in one
// transaction, then the lease keys of its read levels in another.
func readRWState(ctx context.Context, rdb rueidis.Client, name string) (*rwState, error) {
	b := rdb.B()
	res, err := execAll(ctx, rdb, name, b.Type().Key(name).Build(), b.Hgetall().Key(name).Build(), b.Pttl().Key(name).Build())
	if err != nil {
		return nil, err
	}
	st := &rwState{Name: name, Kind: "rwlock", Readers: []rwReader{}}
	st.Keys.Lock, st.Keys.Channel = name, rwlock.Channel(name)
	if typ, _ := res[0].ToString(); typ != "hash" && typ != "none" {
		return nil, fmt.Errorf("key %q is a %s: %w (a read-write lock is a hash)", name, typ, errNotALock)
	}
	fields, err := res[1].AsStrMap()
	if err != nil {
		return nil, fmt.Errorf("HGETALL %s: %w", name, err)
	}
	pttl, _ := res[2].AsInt64()
	st.LeaseRemainingMs = remaining(pttl)
	st.Mode = fields["mode"]
	delete(fields, "mode")
	for field, v := range fields {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("key %q is a hash but %w: field %q is %q, not a hold count", name, errNotALock, field, v)
		}
		if owner, ok := strings.CutSuffix(field, ":write"); ok {
			id, o := splitField(owner)
			st.Writer = &holderInfo{Field: field, ClientID: id, Owner: o, HoldCount: n}
			continue
		}
		id, o := splitField(field)
		st.Readers = append(st.Readers, rwReader{holderInfo: holderInfo{Field: field, ClientID: id, Owner: o, HoldCount: n}})
	}
	sort.Slice(st.Readers, func(i, j int) bool { return st.Readers[i].Field < st.Readers[j].Field })
	st.Locked = st.Mode != ""
	var cmds []rueidis.Completed
	for i, r := range st.Readers {
		for level := 1; level <= int(r.HoldCount) && level <= 1000; level++ {
			key := rwlock.LeaseKey(name, r.Field, level)
			st.Readers[i].Levels = append(st.Readers[i].Levels, rwLevel{Level: level, Key: key})
			cmds = append(cmds, b.Pttl().Key(key).Build())
		}
	}
	if len(cmds) == 0 {
		return st, nil
	}
	res, err = execAll(ctx, rdb, name, cmds...)
	if err != nil {
		return nil, err
	}
	k := 0
	for i := range st.Readers {
		for j := range st.Readers[i].Levels {
			st.Readers[i].Levels[j].RemainingMs, _ = res[k].AsInt64()
			k++
		}
	}
	return st, nil
}

func writeRW(w io.Writer, st *rwState) {
	var b strings.Builder
	switch {
	case !st.Locked:
		fmt.Fprintf(&b, "read-write lock %q: free\n", st.Name)
	case st.LeaseRemainingMs < 0:
		fmt.Fprintf(&b, "read-write lock %q: %s mode, no lease (the key never expires)\n", st.Name, st.Mode)
	default:
		fmt.Fprintf(&b, "read-write lock %q: %s mode, lease %s left\n", st.Name, st.Mode, ms(st.LeaseRemainingMs))
	}
	if st.Writer != nil {
		fmt.Fprintf(&b, "  writer %s  hold count %d\n", st.Writer.Field, st.Writer.HoldCount)
	}
	for _, r := range st.Readers {
		fmt.Fprintf(&b, "  reader %s  hold count %d", r.Field, r.HoldCount)
		for _, l := range r.Levels {
			if l.RemainingMs < 0 {
				fmt.Fprintf(&b, "  level %d: expired", l.Level)
			} else {
				fmt.Fprintf(&b, "  level %d: %s", l.Level, ms(l.RemainingMs))
			}
		}
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// readSemState reads a semaphore in one transaction. It does not give
// back the permits whose lease ended (a status changes nothing): they are
// shown as expired.
func readSemState(ctx context.Context, rdb rueidis.Client, name string) (*semState, error) {
	k := semaphore.KeysOf(name)
	b := rdb.B()
	res, err := execAll(ctx, rdb, name,
		b.Time().Build(),
		b.Type().Key(k.Available).Build(),
		b.Get().Key(k.Available).Build(),
		b.Zrange().Key(k.Leases).Min("0").Max("-1").Withscores().Build(),
		b.Zrange().Key(k.Queue).Min("0").Max("-1").Withscores().Build(),
		b.Zrange().Key(k.QueueDeadlines).Min("0").Max("-1").Withscores().Build())
	if err != nil {
		return nil, err
	}
	st := &semState{Name: name, Kind: "semaphore", Held: []semPermit{}, Queue: []semWaiter{}}
	st.Keys.Available, st.Keys.Leases, st.Keys.Channel = k.Available, k.Leases, k.Channel
	st.Keys.Queue, st.Keys.QueueTimeout = k.Queue, k.QueueDeadlines
	if now, err := res[0].AsIntSlice(); err == nil && len(now) == 2 {
		st.ServerTimeMs = now[0]*1000 + now[1]/1000
	}
	if typ, _ := res[1].ToString(); typ != "string" && typ != "none" {
		return nil, fmt.Errorf("key %q is a %s: %w (a semaphore's count is a string)", name, typ, errNotALock)
	}
	if !res[2].IsNil() {
		n, err := res[2].AsInt64()
		if err != nil {
			return nil, fmt.Errorf("key %q is %w: its value is not a count", name, errNotALock)
		}
		st.Set, st.Available = true, n
	}
	leases, err := res[3].AsZScores()
	if err != nil {
		return nil, fmt.Errorf("ZRANGE %s: %w", k.Leases, err)
	}
	for _, z := range leases {
		p := semPermit{PermitID: permitID(z.Member)}
		if end := int64(z.Score); strconv.FormatInt(end, 10) != semaphore.NoLease {
			rem := end - st.ServerTimeMs
			p.LeaseEndMs, p.RemainingMs = &end, &rem
		}
		st.Held = append(st.Held, p)
	}
	queue, err1 := res[4].AsZScores()
	deadlines, err2 := res[5].AsZScores()
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("ZRANGE %s: %w", k.Queue, err)
	}
	due := make(map[string]int64, len(deadlines))
	for _, z := range deadlines {
		due[z.Member] = int64(z.Score)
	}
	for i, z := range queue {
		w := semWaiter{Position: i + 1, PermitID: permitID(z.Member), JoinedMs: int64(z.Score)}
		if d, ok := due[z.Member]; ok {
			w.DeadlineMs = &d
		}
		st.Queue = append(st.Queue, w)
	}
	return st, nil
}

func writeSem(w io.Writer, st *semState) {
	var b strings.Builder
	if st.Set {
		fmt.Fprintf(&b, "semaphore %q: %d permits available, %d held\n", st.Name, st.Available, len(st.Held))
	} else {
		fmt.Fprintf(&b, "semaphore %q: permits never set, %d held\n", st.Name, len(st.Held))
	}
	for _, p := range st.Held {
		switch {
		case p.RemainingMs == nil:
			fmt.Fprintf(&b, "  permit %s  no lease\n", p.PermitID)
		case *p.RemainingMs > 0:
			fmt.Fprintf(&b, "  permit %s  lease %s left\n", p.PermitID, ms(*p.RemainingMs))
		default:
			fmt.Fprintf(&b, "  permit %s  lease ended %s ago (back at the next call)\n", p.PermitID, ms(-*p.RemainingMs))
		}
	}
	if len(st.Queue) > 0 {
		fmt.Fprintf(&b, "queue: %d waiting, in order\n", len(st.Queue))
		for _, q := range st.Queue {
			fmt.Fprintf(&b, "  %d. %s\n", q.Position, q.PermitID)
		}
	}
	io.WriteString(w, b.String())
}

// readLatchState reads a latch's count (kind "latch"), or a count that may
// be a latch's or a semaphore's (kind "counter").
func readLatchState(ctx context.Context, rdb rueidis.Client, name, kind string) (*latchState, error) {
	b := rdb.B()
	res, err := execAll(ctx, rdb, name, b.Type().Key(name).Build(), b.Get().Key(name).Build())
	if err != nil {
		return nil, err
	}
	if typ, _ := res[0].ToString(); typ != "string" && typ != "none" {
		return nil, fmt.Errorf("key %q is a %s: %w (a count is a string)", name, typ, errNotALock)
	}
	var n int64
	if !res[1].IsNil() {
		if n, err = res[1].AsInt64(); err != nil {
			return nil, fmt.Errorf("key %q is %w: its value is not a count", name, errNotALock)
		}
	}
	st := &latchState{Name: name, Kind: kind}
	st.Keys.Count = name
	if kind == "counter" {
		st.Value = &n
		return st, nil
	}
	open := n <= 0
	st.Count, st.Open = &n, &open
	st.Keys.Channel = latch.Channel(name)
	return st, nil
}

func writeLatch(w io.Writer, st *latchState) {
	switch {
	case st.Value != nil:
		fmt.Fprintf(w, "%q holds the count %d: a semaphore with %d permits available and none held, or a count-down latch at %d (say which with --kind)\n",
			st.Name, *st.Value, *st.Value, *st.Value)
	case *st.Open:
		fmt.Fprintf(w, "count-down latch %q: open (count 0)\n", st.Name)
	default:
		fmt.Fprintf(w, "count-down latch %q: count %d\n", st.Name, *st.Count)
	}
}
