package checker_test

import (
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/assert"

	"github.com/relock-go/relock/integration/checker"
)

// op builds an operation of process proc (whose owner is proc too) over
// [call, ret] in milliseconds.
func op(proc string, kind checker.Kind, call, ret int64, res checker.Result) checker.Operation {
	o := checker.Operation{Proc: proc, Owner: proc, Kind: kind, Call: call * 1e6, Return: ret * 1e6, Result: res}
	if ret < 0 {
		o.Return = checker.Pending
	}
	return o
}

func withToken(o checker.Operation, token int64) checker.Operation {
	o.Token = token
	return o
}

func reentry(o checker.Operation) checker.Operation {
	o.Reentry = true
	return o
}

const (
	acq  = checker.Acquire
	rel  = checker.Release
	lost = checker.Lost
	ok   = checker.OK
)

func TestLinearizable(t *testing.T) {
	cases := []struct {
		desc string
		ops  []checker.Operation
		want porcupine.CheckResult
	}{
		{"reentrant holds in turn", []checker.Operation{
			op("a", acq, 0, 10, ok), reentry(op("a", acq, 11, 12, ok)),
			op("a", rel, 13, 14, ok), op("a", rel, 15, 16, ok),
			op("b", acq, 5, 20, ok), op("b", rel, 21, 22, ok),
		}, porcupine.Ok},
		{"overlapping holds", []checker.Operation{
			op("a", acq, 0, 10, ok), op("b", acq, 20, 30, ok), op("a", rel, 40, 50, ok),
		}, porcupine.Illegal},
		{"concurrent grants", []checker.Operation{
			op("a", acq, 0, 10, ok), op("b", acq, 0, 10, ok),
		}, porcupine.Illegal},
		{"release by an owner that never held", []checker.Operation{
			op("a", acq, 0, 10, ok), op("b", rel, 20, 30, ok),
		}, porcupine.Illegal},
		{"release of a level too many", []checker.Operation{
			op("a", acq, 0, 10, ok), op("a", rel, 20, 30, ok), op("a", rel, 40, 50, ok),
		}, porcupine.Illegal},
		{"not held while holding", []checker.Operation{
			op("a", acq, 0, 10, ok), op("a", rel, 20, 30, checker.NotHeld),
		}, porcupine.Illegal},
		{"loss noticed after the takeover", []checker.Operation{
			op("a", acq, 0, 10, ok), op("b", acq, 20, 30, ok), op("a", lost, 10, 40, ok),
			op("a", rel, 41, 42, checker.NotHeld), op("b", rel, 50, 51, ok),
		}, porcupine.Ok},
		{"loss that began after the takeover", []checker.Operation{
			op("a", acq, 0, 10, ok), op("b", acq, 20, 30, ok), op("a", lost, 35, 40, ok),
		}, porcupine.Illegal},
		{"a grant whose lease ran out before its reply came", []checker.Operation{
			// a's acquisition ran, then the server stalled with its reply
			// for longer than the lease; b's, sent before, ran after the
			// stall and found it expired. a's loss dates from its call
			// (testprog records it so).
			op("a", acq, 0, 100, ok), op("b", acq, 1, 99, ok), op("a", lost, 0, 110, ok),
			op("a", rel, 111, 112, checker.NotHeld), op("b", rel, 105, 106, ok),
		}, porcupine.Ok},
		{"loss noticed before the key expired", []checker.Operation{
			op("a", acq, 0, 10, ok), op("a", lost, 10, 20, ok), op("a", rel, 21, 22, ok),
		}, porcupine.Ok},
		{"failed acquire that may have won", []checker.Operation{
			op("a", acq, 0, 10, checker.Fail), op("b", acq, 20, 30, ok), op("b", rel, 40, 50, ok),
		}, porcupine.Ok},
		{"unknown release", []checker.Operation{
			op("a", acq, 0, 10, ok), op("a", rel, 20, 30, checker.Unknown), op("a", lost, 10, 60, ok),
			op("b", acq, 40, 70, ok),
		}, porcupine.Ok},
		{"crash frees after the kill", []checker.Operation{
			op("a", acq, 0, 10, ok), checker.Crash("a", "a", 50e6), op("b", acq, 40, 70, ok),
		}, porcupine.Ok},
		{"crash does not free before the kill", []checker.Operation{
			op("a", acq, 0, 10, ok), checker.Crash("a", "a", 50e6), op("b", acq, 20, 30, ok),
		}, porcupine.Illegal},
		{"pending acquire of a killed process", []checker.Operation{
			op("a", acq, 0, -1, checker.Unknown), op("b", acq, 20, 30, ok), op("b", rel, 40, 50, ok),
		}, porcupine.Ok},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			res := checker.CheckLinearizable(tc.ops, 10*time.Second)
			assert.Equal(t, tc.want, res.Result, "CheckLinearizable")
			assert.Equal(t, tc.want == porcupine.Ok, res.OK(), "OK() for %v", res.Result)
		})
	}
}

func TestTimeoutIsNotOK(t *testing.T) {
	assert.False(t, (checker.LinearizabilityResult{Result: porcupine.Unknown}).OK(), "a check that timed out counts as OK")
}

func TestFencing(t *testing.T) {
	w := func(proc string, call, ret, token int64, value string, res checker.Result) checker.Operation {
		o := withToken(op(proc, checker.Write, call, ret, res), token)
		o.Value = value
		return o
	}
	cases := []struct {
		desc    string
		ops     []checker.Operation
		applied []checker.Applied
		want    []string // violation kinds, in order
	}{
		{"clean", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 1), withToken(reentry(op("a", acq, 11, 12, ok)), 1),
			w("a", 13, 14, 1, "a-1", ok), withToken(op("b", acq, 5, 30, ok), 2),
			w("b", 31, 32, 2, "b-1", ok), w("a", 33, 34, 1, "a-2", checker.Stale),
		}, []checker.Applied{{1, "a-1"}, {2, "b-1"}}, nil},
		{"conflicting write accepted", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 1), withToken(op("b", acq, 20, 30, ok), 2),
			w("b", 31, 32, 2, "b-1", ok), w("a", 33, 34, 1, "a-1", ok),
		}, []checker.Applied{{2, "b-1"}, {1, "a-1"}}, []string{checker.ViolWriteOrder}},
		{"duplicate token", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 3), withToken(op("b", acq, 0, 10, ok), 3),
		}, nil, []string{checker.ViolTokenDuplicate}},
		{"regressed token", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 5), withToken(op("b", acq, 20, 30, ok), 4),
		}, nil, []string{checker.ViolTokenRegressed}},
		{"concurrent acquisitions may come in any order", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 5), withToken(op("b", acq, 5, 30, ok), 4),
		}, nil, nil},
		{"token kept after an unknown release", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 5), op("a", rel, 11, 12, checker.Fail),
			withToken(op("a", acq, 20, 30, ok), 5),
		}, nil, nil},
		{"re-entry with another token", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 5), withToken(reentry(op("a", acq, 20, 30, ok)), 6),
		}, nil, []string{checker.ViolReentryToken}},
		{"re-entry that took a new hold after its hold was lost", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 5), op("a", lost, 12, 25, ok),
			withToken(reentry(op("a", acq, 20, 30, ok)), 6),
		}, nil, nil},
		{"re-entry with another token, the loss told after it returned", []checker.Operation{
			withToken(op("a", acq, 0, 10, ok), 5), withToken(reentry(op("a", acq, 20, 30, ok)), 6),
			op("a", lost, 12, 35, ok),
		}, nil, []string{checker.ViolReentryToken}},
		{"accepted write never applied", []checker.Operation{
			w("a", 0, 10, 1, "a-1", ok),
		}, nil, []string{checker.ViolWriteNotApplied}},
		{"stale write applied", []checker.Operation{
			w("a", 0, 10, 1, "a-1", checker.Stale),
		}, []checker.Applied{{1, "a-1"}}, []string{checker.ViolStaleApplied}},
		{"write applied twice", []checker.Operation{
			w("a", 0, 10, 1, "a-1", ok),
		}, []checker.Applied{{1, "a-1"}, {1, "a-1"}}, []string{checker.ViolAppliedTwice}},
		{"write nobody made", nil, []checker.Applied{{1, "x"}}, []string{checker.ViolPhantomWrite}},
		{"unknown write applied or not", []checker.Operation{
			w("a", 0, -1, 1, "a-1", checker.Unknown), w("a", 20, 30, 1, "a-2", checker.Fail),
		}, []checker.Applied{{1, "a-1"}}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			r := checker.CheckFencing(tc.ops, tc.applied)
			var got []string
			for _, v := range r.Violations {
				got = append(got, v.Kind)
			}
			assert.Equal(t, tc.want, got, "the kinds of the violations %v", r.Violations)
		})
	}
}

// TestOverlappingHistoryFails is the checker's own canary: a history in
// which a paused holder writes after the next holder, without fencing,
// fails both checks.
func TestOverlappingHistoryFails(t *testing.T) {
	ops := []checker.Operation{
		withToken(op("a", acq, 0, 10, ok), 1),
		withToken(op("b", acq, 20, 30, ok), 2),
		{Proc: "b", Owner: "b", Kind: checker.Write, Call: 31e6, Return: 32e6, Token: 2, Value: "b-1", Result: ok},
		{Proc: "a", Owner: "a", Kind: checker.Write, Call: 40e6, Return: 41e6, Token: 1, Value: "a-1", Result: ok},
		op("a", rel, 42, 43, ok),
		op("b", rel, 44, 45, ok),
	}
	applied := []checker.Applied{{2, "b-1"}, {1, "a-1"}}
	r := checker.CheckFencing(ops, applied)
	assert.Equal(t, 1, r.Count(checker.ViolWriteOrder), "CheckFencing's %s violations in %v", checker.ViolWriteOrder, r.Violations)
	assert.Equal(t, porcupine.Illegal, checker.CheckLinearizable(ops, 10*time.Second).Result, "CheckLinearizable")
	n, longest := checker.Overlaps(checker.Holds(ops, 100e6))
	assert.Equal(t, 1, n, "Overlaps")
	assert.Equal(t, 12*time.Millisecond, longest, "the longest overlap")
}

func TestHolds(t *testing.T) {
	ops := []checker.Operation{
		withToken(op("a", acq, 0, 10, ok), 1),
		withToken(reentry(op("a", acq, 11, 12, ok)), 1),
		op("a", rel, 13, 14, ok),
		op("a", rel, 15, 16, ok),
		withToken(op("b", acq, 5, 20, ok), 2),
		op("b", lost, 20, 60, ok),
		op("b", rel, 50, 70, checker.Unknown),
		withToken(op("c", acq, 65, 80, ok), 3),
		checker.Crash("c", "c", 90e6),
	}
	got := checker.Holds(ops, 200e6)
	want := []checker.Hold{
		{Proc: "a", Token: 1, Start: 10e6, End: 15e6},
		{Proc: "b", Token: 2, Start: 20e6, End: 50e6},
		{Proc: "c", Token: 3, Start: 80e6, End: 90e6},
	}
	assert.Equal(t, want, got, "Holds")
	n, _ := checker.Overlaps(got)
	assert.Zero(t, n, "Overlaps")
}

func TestPair(t *testing.T) {
	recs := []checker.Record{
		{Proc: "a", Kind: checker.Start, Phase: checker.Whole, Call: 1},
		{Proc: "a", Seq: 1, Kind: acq, Phase: checker.Call, Owner: "a", Call: 10},
		{Proc: "b", Seq: 1, Kind: acq, Phase: checker.Call, Owner: "b", Call: 11},
		{Proc: "a", Seq: 1, Kind: acq, Phase: checker.Return, Owner: "a", Call: 10, Return: 20, Token: 7, Result: ok},
		{Proc: "a", Seq: 2, Kind: lost, Phase: checker.Whole, Owner: "a", Call: 20, Return: 30, Result: ok},
	}
	got := checker.Pair(recs)
	want := []checker.Operation{
		{Proc: "a", Seq: 1, Kind: acq, Owner: "a", Call: 10, Return: 20, Token: 7, Result: ok},
		{Proc: "b", Seq: 1, Kind: acq, Owner: "b", Call: 11, Return: checker.Pending, Result: checker.Unknown},
		{Proc: "a", Seq: 2, Kind: lost, Owner: "a", Call: 20, Return: 30, Result: ok},
	}
	assert.Equal(t, want, got, "Pair")
}

func TestParseMonitorLine(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{`+1700000000.123456 [0 lua] "hset" "reg" "token" "5" "value" "p1-3"`,
			[]string{"hset", "reg", "token", "5", "value", "p1-3"}},
		{`1700000000.123456 [0 127.0.0.1:5000] "HSET" "a b" "q\"x\\y" "\x00\n"` + "\r\n",
			[]string{"HSET", "a b", `q"x\y`, "\x00\n"}},
		{`+1700000000.1 [0 unix:/tmp/s] "PING"`, []string{"PING"}},
	}
	for _, tc := range cases {
		got, err := checker.ParseMonitorLine(tc.line)
		assert.NoError(t, err, "ParseMonitorLine(%q)", tc.line)
		assert.Equal(t, tc.want, got, "ParseMonitorLine(%q)", tc.line)
	}
	for _, bad := range []string{"+OK", `+1 [0 lua] "unterminated`, `+1 [0 lua] bare`} {
		_, err := checker.ParseMonitorLine(bad)
		assert.Error(t, err, "ParseMonitorLine(%q)", bad)
	}
	a, isWrite := checker.RegisterWrite([]string{"hset", "reg", "token", "5", "value", "v"}, "reg")
	assert.True(t, isWrite, "RegisterWrite(hset)")
	assert.Equal(t, checker.Applied{Token: 5, Value: "v"}, a, "RegisterWrite(hset)")
	_, isWrite = checker.RegisterWrite([]string{"hget", "reg", "token"}, "reg")
	assert.False(t, isWrite, "RegisterWrite(hget)")
}
