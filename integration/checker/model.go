package checker

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
)

// MutexState is the state of an owner-aware reentrant mutex: who holds it
// and how many levels. The zero value is a free mutex.
type MutexState struct {
	Owner string
	Count int
}

// Input is what a mutex operation asks for.
type Input struct {
	Kind  Kind // Acquire, Release or Lost
	Owner string
}

// Model is the owner-aware reentrant mutex as a porcupine model.
//
//   - Acquire by o succeeds only when the mutex is free or held by o (one
//     level more). An acquisition that failed may still have taken the
//     lock unknown to its caller (its reply was lost), so a failed or
//     unknown Acquire either changed nothing or took a level.
//   - Release by o with result OK needs o to hold a level and removes one;
//     NotHeld needs o to hold nothing; Unknown does either.
//   - Lost of o frees the mutex if o holds it (the lease ran out); because
//     a holder may notice a loss a little before Redis expires the key, it
//     may also change nothing.
//
// A history is linearizable against Model if and only if no two owners
// ever held the lock at once, taking lease expiry into account only where
// a Lost operation says a hold ended.
var Model = (&porcupine.NondeterministicModel{
	Init: func() []any { return []any{MutexState{}} },
	Step: func(state, input, output any) []any {
		return step(state.(MutexState), input.(Input), output.(Result))
	},
	DescribeOperation: func(input, output any) string {
		in := input.(Input)
		return fmt.Sprintf("%s(%s) -> %s", in.Kind, in.Owner, output)
	},
	DescribeState: func(state any) string {
		s := state.(MutexState)
		if s.Count == 0 {
			return "free"
		}
		return fmt.Sprintf("%s x%d", s.Owner, s.Count)
	},
}).ToModel()

func step(s MutexState, in Input, out Result) []any {
	holds := s.Count > 0 && s.Owner == in.Owner
	switch in.Kind {
	case Acquire:
		can := s.Count == 0 || s.Owner == in.Owner
		next := MutexState{Owner: in.Owner, Count: s.Count + 1}
		switch {
		case out == OK && can:
			return []any{next}
		case out == OK:
			return nil
		case can:
			return []any{s, next}
		default:
			return []any{s}
		}
	case Release:
		next := MutexState{Owner: s.Owner, Count: s.Count - 1}
		if next.Count == 0 {
			next.Owner = ""
		}
		switch {
		case out == OK && holds:
			return []any{next}
		case out == NotHeld && !holds:
			return []any{s}
		case out == OK || out == NotHeld:
			return nil
		case holds:
			return []any{s, next}
		default:
			return []any{s}
		}
	case Lost:
		if holds {
			return []any{MutexState{}, s}
		}
		return []any{s}
	}
	return nil
}

// LinearizabilityResult is what CheckLinearizable found.
type LinearizabilityResult struct {
	Result     porcupine.CheckResult // Ok, Illegal, or Unknown (timed out)
	Operations int                   // acquire, release and lost operations checked
	Elapsed    time.Duration
}

// OK reports whether the history was found linearizable. A timeout
// (Unknown) is not OK.
func (r LinearizabilityResult) OK() bool { return r.Result == porcupine.Ok }

// CheckLinearizable checks the acquire, release and lost operations of ops
// against Model. A pending operation has no return; it may take effect at
// any time after its call.
func CheckLinearizable(ops []Operation, timeout time.Duration) LinearizabilityResult {
	hist := MutexOperations(ops)
	start := time.Now()
	res := porcupine.CheckOperationsTimeout(Model, hist, timeout)
	return LinearizabilityResult{Result: res, Operations: len(hist), Elapsed: time.Since(start)}
}

// MutexOperations converts the mutex operations of ops to porcupine's form.
func MutexOperations(ops []Operation) []porcupine.Operation {
	ids := make(map[string]int)
	var hist []porcupine.Operation
	for _, o := range ops {
		if o.Kind != Acquire && o.Kind != Release && o.Kind != Lost {
			continue
		}
		id, ok := ids[o.Proc]
		if !ok {
			id = len(ids)
			ids[o.Proc] = id
		}
		out := o.Result
		if o.Return == Pending && o.Kind != Lost {
			out = Unknown
		}
		hist = append(hist, porcupine.Operation{
			ClientId: id,
			Input:    Input{Kind: o.Kind, Owner: o.Owner},
			Call:     o.Call,
			Output:   out,
			Return:   o.Return,
		})
	}
	return hist
}
