// Package checker checks the history of a fenced lock used by several
// processes: who acquired and released it, with which fencing tokens, and
// which writes a fenced register accepted, in the order it applied them.
//
// A history is checked two ways:
//
//   - Fencing (CheckFencing): the register applied accepted writes in
//     non-decreasing token order (a write with token t applied after a
//     write with token t' > t is a violation); every write a process was
//     told was accepted was applied, and none it was told was stale; no
//     two new acquisitions got the same token, and an acquisition that
//     began after another one had returned got a larger token.
//   - Linearizability (CheckLinearizable): the acquire, release and loss
//     operations are linearizable against an owner-aware reentrant mutex
//     (Model), checked with porcupine. Loss of a hold (a lease that ran
//     out, a process killed) is an operation too: it may free the lock at
//     any point between the call of the hold's acquisition (a lease may
//     run out before the grant's reply arrives) and the moment the loss
//     was noticed.
//
// Processes write Records, one JSON object a line, with wall-clock times
// (all processes run on one machine, so their clocks agree); Pair turns
// them into Operations.
package checker

import (
	"fmt"
	"math"
	"sort"
)

// Kind is the kind of an operation.
type Kind string

// Operation kinds.
const (
	Acquire Kind = "acquire" // a new acquisition or a re-entry
	Release Kind = "release" // one hold level given back
	Write   Kind = "write"   // a write through the fenced register
	Lost    Kind = "lost"    // a hold ended without a release
	Stall   Kind = "stall"   // marker: the process holds the lock and stalls now
	Start   Kind = "start"   // marker: the process is ready
)

// Result is the outcome of an operation.
type Result string

// Results.
const (
	OK      Result = "ok"      // acquired, released, or write applied
	Fail    Result = "fail"    // the call failed with an error
	Stale   Result = "stale"   // write refused: a newer token was applied
	NotHeld Result = "notheld" // release by an owner that held nothing
	Unknown Result = "unknown" // the outcome is not known (no reply, crash)
)

// Phase tells a call record from a return record.
type Phase string

// Phases of a record.
const (
	Call   Phase = "call"   // written before the operation starts
	Return Phase = "return" // written after it returned
	Whole  Phase = "whole"  // an operation recorded at once (Lost, markers)
)

// Record is one line a process writes. A call record comes before each
// operation and a return record after it, with the same Seq; an operation
// whose return record is missing (the process was killed) is pending.
type Record struct {
	Proc    string `json:"proc"`
	Seq     int    `json:"seq"`
	Phase   Phase  `json:"phase"`
	Kind    Kind   `json:"kind"`
	Owner   string `json:"owner,omitempty"`
	Call    int64  `json:"call"`          // Unix ns
	Return  int64  `json:"ret,omitempty"` // Unix ns
	Token   int64  `json:"token,omitempty"`
	Value   string `json:"value,omitempty"`
	Reentry bool   `json:"reentry,omitempty"`
	Result  Result `json:"result,omitempty"`
	Err     string `json:"err,omitempty"`
}

// Pending is the return time of an operation that never returned.
const Pending int64 = math.MaxInt64

// Operation is a call paired with its return.
type Operation struct {
	Proc    string
	Seq     int
	Kind    Kind
	Owner   string
	Call    int64 // Unix ns
	Return  int64 // Unix ns; Pending if it never returned
	Token   int64 // acquire: the hold's token; write: the writer's token
	Value   string
	Reentry bool
	Result  Result
	Err     string
}

func (o Operation) String() string {
	ret := "pending"
	if o.Return != Pending {
		ret = fmt.Sprintf("+%.1fms", float64(o.Return-o.Call)/1e6)
	}
	s := fmt.Sprintf("%s#%d %s owner=%s token=%d", o.Proc, o.Seq, o.Kind, o.Owner, o.Token)
	if o.Value != "" {
		s += " value=" + o.Value
	}
	if o.Reentry {
		s += " reentry"
	}
	s += fmt.Sprintf(" -> %s (%s)", o.Result, ret)
	if o.Err != "" {
		s += ": " + o.Err
	}
	return s
}

// Pair turns records into operations, in call order. An operation without a
// return record is pending: Return is Pending and Result Unknown. Marker
// records (Start, Stall) are left out.
func Pair(recs []Record) []Operation {
	type key struct {
		proc string
		seq  int
	}
	calls := make(map[key]int) // index in ops of a call waiting for its return
	var ops []Operation
	for _, r := range recs {
		if r.Kind == Start || r.Kind == Stall {
			continue
		}
		op := Operation{Proc: r.Proc, Seq: r.Seq, Kind: r.Kind, Owner: r.Owner, Call: r.Call,
			Return: r.Return, Token: r.Token, Value: r.Value, Reentry: r.Reentry, Result: r.Result, Err: r.Err}
		switch r.Phase {
		case Call:
			op.Return, op.Result = Pending, Unknown
			calls[key{r.Proc, r.Seq}] = len(ops)
			ops = append(ops, op)
		case Return:
			if i, ok := calls[key{r.Proc, r.Seq}]; ok {
				delete(calls, key{r.Proc, r.Seq})
				ops[i] = op
				if ops[i].Call == 0 {
					ops[i].Call = r.Call
				}
				continue
			}
			ops = append(ops, op)
		default:
			ops = append(ops, op)
		}
	}
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// Crash is the loss of whatever owner held when its process was killed at
// the given time: it may take effect at any point after the kill.
func Crash(proc, owner string, at int64) Operation {
	return Operation{Proc: proc, Kind: Lost, Owner: owner, Call: at, Return: Pending, Result: OK, Err: "killed"}
}
