package checker

import (
	"fmt"
	"sort"
	"time"
)

// Applied is a write the register applied, in the order it applied them.
type Applied struct {
	Token int64
	Value string
}

// Violation is one breach of a property the checker verifies.
type Violation struct {
	Kind   string // one of the Viol... constants
	Detail string
}

func (v Violation) String() string { return v.Kind + ": " + v.Detail }

// Kinds of violations.
const (
	// ViolWriteOrder: the register applied a write with token t after
	// one with a larger token (a conflicting write was accepted).
	ViolWriteOrder = "write-order"
	// ViolWriteNotApplied: a process was told its write was accepted, but
	// the register never applied it.
	ViolWriteNotApplied = "write-not-applied"
	// ViolStaleApplied: a process was told its write was stale, but the
	// register applied it.
	ViolStaleApplied = "stale-applied"
	// ViolAppliedTwice: one write was applied twice (it was resent).
	ViolAppliedTwice = "applied-twice"
	// ViolPhantomWrite: the register applied a write no process made.
	ViolPhantomWrite = "phantom-write"
	// ViolTokenDuplicate: two new acquisitions got the same token.
	ViolTokenDuplicate = "token-duplicate"
	// ViolTokenRegressed: an acquisition that began after another had
	// returned got a smaller token.
	ViolTokenRegressed = "token-regressed"
	// ViolReentryToken: a re-entry returned another token than the hold's.
	ViolReentryToken = "reentry-token"
)

// FencingReport is what CheckFencing found.
type FencingReport struct {
	Acquisitions int // new acquisitions that succeeded
	Reentries    int
	// Reused counts acquisitions that got the token of their owner's
	// previous hold after a release of it whose outcome was unknown:
	// they re-entered that hold (not a violation).
	Reused     int
	Writes     int // write operations
	Accepted   int // writes the register applied
	Stale      int // writes refused with a stale token
	Unknown    int // writes whose outcome is unknown
	Violations []Violation
}

// Count returns the number of violations of the given kind.
func (r FencingReport) Count(kind string) int {
	n := 0
	for _, v := range r.Violations {
		if v.Kind == kind {
			n++
		}
	}
	return n
}

// CheckFencing checks the tokens of acquisitions and the writes of a
// register, given the operations of every process and the register's apply
// log (every write it applied, in order).
func CheckFencing(ops []Operation, applied []Applied) FencingReport {
	var r FencingReport
	r.checkTokens(ops)
	r.checkWrites(ops, applied)
	return r
}

func (r *FencingReport) add(kind, format string, args ...any) {
	r.Violations = append(r.Violations, Violation{Kind: kind, Detail: fmt.Sprintf(format, args...)})
}

// checkTokens: new acquisitions have distinct tokens, growing in real time;
// a re-entry keeps its hold's token.
func (r *FencingReport) checkTokens(ops []Operation) {
	var acqs []Operation
	holdToken := make(map[string]int64) // owner -> token of its current hold
	holdCall := make(map[string]int64)  // owner -> when its current hold's acquisition began
	// lostDuring reports whether owner was told, between from and to, that
	// a hold of it was lost: a re-entry then may have taken a new hold.
	lostDuring := func(owner string, from, to int64) bool {
		for _, l := range ops {
			if l.Kind == Lost && l.Owner == owner && l.Call >= from && l.Return != Pending && l.Return <= to {
				return true
			}
		}
		return false
	}
	for _, o := range ops {
		if o.Kind != Acquire || o.Result != OK || o.Token == 0 {
			continue
		}
		if o.Reentry {
			t, ok := holdToken[o.Owner]
			if !ok || t == o.Token || !lostDuring(o.Owner, holdCall[o.Owner], o.Return) {
				r.Reentries++
				if ok && t != o.Token {
					r.add(ViolReentryToken, "%v: the hold's token is %d", o, t)
				}
				continue
			}
			// The hold it meant to re-enter was lost (and the owner told)
			// while it ran: it took a new hold, with a new token.
		}
		r.Acquisitions++
		holdToken[o.Owner], holdCall[o.Owner] = o.Token, o.Call
		acqs = append(acqs, o)
	}
	// Releases whose outcome is unknown, by owner: after one, the owner's
	// next acquisition may re-enter the hold it could not release, and
	// then it keeps that hold's token.
	var uncertain []Operation
	for _, o := range ops {
		if o.Kind == Release && o.Result != OK && o.Result != NotHeld {
			uncertain = append(uncertain, o)
		}
	}
	releasedUncertainly := func(owner string, from, to int64) bool {
		for _, u := range uncertain {
			if u.Owner == owner && u.Call > from && u.Call < to {
				return true
			}
		}
		return false
	}
	byToken := make(map[int64]Operation)
	for _, o := range acqs {
		if prev, dup := byToken[o.Token]; dup {
			if prev.Owner == o.Owner && releasedUncertainly(o.Owner, prev.Call, o.Call) {
				r.Reused++
			} else {
				r.add(ViolTokenDuplicate, "%v and %v", prev, o)
			}
			continue
		}
		byToken[o.Token] = o
	}
	// Walk acquisitions by call time; maxDone is the largest token of
	// those that returned before the current one was called.
	byCall := append([]Operation(nil), acqs...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].Call < byCall[j].Call })
	byRet := append([]Operation(nil), acqs...)
	sort.Slice(byRet, func(i, j int) bool { return byRet[i].Return < byRet[j].Return })
	var maxDone Operation
	j := 0
	for _, o := range byCall {
		for j < len(byRet) && byRet[j].Return < o.Call {
			if byRet[j].Token > maxDone.Token {
				maxDone = byRet[j]
			}
			j++
		}
		if maxDone.Token != 0 && o.Token < maxDone.Token {
			r.add(ViolTokenRegressed, "%v began after %v had returned", o, maxDone)
		}
	}
}

// checkWrites compares the writes the processes recorded with the
// register's apply log.
func (r *FencingReport) checkWrites(ops []Operation, applied []Applied) {
	writes := make(map[string]Operation)
	for _, o := range ops {
		if o.Kind != Write {
			continue
		}
		r.Writes++
		writes[o.Value] = o
		switch o.Result {
		case Stale:
			r.Stale++
		case OK:
		default:
			r.Unknown++
		}
	}
	seen := make(map[string]bool)
	var last Applied
	for i, a := range applied {
		r.Accepted++
		if i > 0 && a.Token < last.Token {
			r.add(ViolWriteOrder, "write %q with token %d applied after write %q with token %d", a.Value, a.Token, last.Value, last.Token)
		}
		if a.Token >= last.Token {
			last = a
		}
		if seen[a.Value] {
			r.add(ViolAppliedTwice, "write %q (token %d)", a.Value, a.Token)
		}
		seen[a.Value] = true
		w, ok := writes[a.Value]
		switch {
		case !ok:
			r.add(ViolPhantomWrite, "write %q with token %d", a.Value, a.Token)
		case w.Result == Stale:
			r.add(ViolStaleApplied, "%v", w)
		case w.Token != a.Token:
			r.add(ViolPhantomWrite, "%v applied with token %d", w, a.Token)
		}
	}
	for _, w := range writes {
		if w.Result == OK && !seen[w.Value] {
			r.add(ViolWriteNotApplied, "%v", w)
		}
	}
}

// Hold is the time during which one process believed it held the lock:
// from its acquisition's return to the first of its final release's call,
// the moment it noticed the loss, or its crash.
type Hold struct {
	Proc       string
	Token      int64
	Start, End int64 // Unix ns
}

// Holds returns the holds of every process. A hold still open at the end
// of the history ends at end.
func Holds(ops []Operation, end int64) []Hold {
	type open struct {
		hold   Hold
		levels int
	}
	cur := make(map[string]*open)
	var holds []Hold
	closeHold := func(proc string, at int64) {
		if h := cur[proc]; h != nil {
			h.hold.End = min(max(at, h.hold.Start), end)
			holds = append(holds, h.hold)
			delete(cur, proc)
		}
	}
	// Each operation counts at the moment it changed the process's belief:
	// an acquisition at its return, a release at its call, a loss when it
	// was noticed (a crash at the kill).
	at := func(o Operation) int64 {
		switch {
		case o.Kind == Release:
			return o.Call
		case o.Return == Pending:
			return o.Call
		}
		return o.Return
	}
	sorted := append([]Operation(nil), ops...)
	sort.SliceStable(sorted, func(i, j int) bool { return at(sorted[i]) < at(sorted[j]) })
	for _, o := range sorted {
		h := cur[o.Proc]
		switch o.Kind {
		case Acquire:
			if o.Result != OK {
				continue
			}
			if h != nil {
				h.levels++
				continue
			}
			cur[o.Proc] = &open{hold: Hold{Proc: o.Proc, Token: o.Token, Start: o.Return}, levels: 1}
		case Release:
			if h == nil {
				continue
			}
			if o.Result == OK && h.levels > 1 {
				h.levels--
				continue
			}
			closeHold(o.Proc, at(o))
		case Lost:
			if h == nil {
				continue
			}
			closeHold(o.Proc, at(o))
		}
	}
	for proc := range cur {
		closeHold(proc, end)
	}
	sort.Slice(holds, func(i, j int) bool { return holds[i].Start < holds[j].Start })
	return holds
}

// Overlaps counts pairs of holds of different processes that overlap in
// time, and returns the longest overlap. With leases, a process that is
// paused past its lease overlaps with the next holder; that is what
// fencing tokens are for. Without such pauses there should be none.
func Overlaps(holds []Hold) (n int, longest time.Duration) {
	for i, a := range holds {
		for _, b := range holds[i+1:] {
			if b.Start >= a.End {
				continue
			}
			if a.Proc == b.Proc {
				continue
			}
			n++
			longest = max(longest, time.Duration(min(a.End, b.End)-b.Start))
		}
	}
	return n, longest
}
