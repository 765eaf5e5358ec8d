package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/relock-go/relock/internal/layout"
)

// The text that status prints for people, one function per kind. Each
// prints the sections its kind has and no other.

// writeLock prints a lock, fenced lock or fair lock: a fair lock's queue
// and a fenced lock's counter only for those kinds.
func writeLock(w io.Writer, st *lockState) {
	var b strings.Builder
	title := fmt.Sprintf("%s %q", noun(st.Kind), st.Name)
	switch {
	case !st.Locked:
		fmt.Fprintf(&b, "%s: free\n", title)
	case st.LeaseRemainingMs < 0:
		fmt.Fprintf(&b, "%s: held, no lease (the key never expires)\n", title)
	default:
		fmt.Fprintf(&b, "%s: held, lease %s left\n", title, ms(st.LeaseRemainingMs))
	}
	for _, h := range st.Holders {
		fmt.Fprintf(&b, "  holder %s  hold count %d\n", h.Field, h.HoldCount)
	}
	if st.Kind == layout.KindFair {
		writeQueue(&b, st.Queue)
	}
	if st.FencingCounter != nil {
		fmt.Fprintf(&b, "fencing counter: %d\n", *st.FencingCounter)
	}
	io.WriteString(w, b.String())
}

// writeQueue prints a fair lock's queue, head first.
func writeQueue(b *strings.Builder, queue []waiterInfo) {
	if len(queue) == 0 {
		b.WriteString("fair queue: empty\n")
		return
	}
	fmt.Fprintf(b, "fair queue: %d waiting, head first\n", len(queue))
	for _, q := range queue {
		fmt.Fprintf(b, "  %d. %s  ", q.Position, q.Field)
		switch {
		case q.RemainingMs == nil:
			b.WriteString("no deadline\n")
		case *q.RemainingMs >= 0:
			fmt.Fprintf(b, "deadline in %s\n", ms(*q.RemainingMs))
		default:
			fmt.Fprintf(b, "deadline passed %s ago (dropped when it reaches the head)\n", ms(-*q.RemainingMs))
		}
	}
}

// writeRW prints a read-write lock: its mode, writer and readers.
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

// writeSem prints a semaphore: its permits available and held, and its
// queue when someone waits.
func writeSem(w io.Writer, st *semState) {
	var b strings.Builder
	if st.Set {
		fmt.Fprintf(&b, "semaphore %q: %s available, %d held\n", st.Name, plural(st.Available, "permit"), len(st.Held))
	} else {
		fmt.Fprintf(&b, "semaphore %q: permits never set, %d held\n", st.Name, len(st.Held))
	}
	for _, p := range st.Held {
		fmt.Fprintf(&b, "  permit %s", p.PermitID)
		if p.Owner != "" {
			fmt.Fprintf(&b, "  taken by %s", layout.Field(p.ClientID, p.Owner))
		}
		switch {
		case p.RemainingMs == nil:
			b.WriteString("  no lease\n")
		case *p.RemainingMs > 0:
			fmt.Fprintf(&b, "  lease %s left\n", ms(*p.RemainingMs))
		default:
			fmt.Fprintf(&b, "  lease ended %s ago (back at the next call)\n", ms(-*p.RemainingMs))
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

// writeRate prints a rate limiter.
func writeRate(w io.Writer, st *rateState) {
	switch {
	case !st.Set:
		fmt.Fprintf(w, "rate limiter %q: no rate set (its window keys are there)\n", st.Name)
	case st.Available == nil:
		fmt.Fprintf(w, "rate limiter %q: %d per %s, a window per client\n", st.Name, st.Rate, ms(st.IntervalMs))
	default:
		fmt.Fprintf(w, "rate limiter %q: %d per %s, %s left in the window\n", st.Name, st.Rate, ms(st.IntervalMs),
			plural(*st.Available, "permit"))
		for _, g := range st.Grants {
			fmt.Fprintf(w, "  grant %s  %s, leaves the window in %s\n", g.ID, plural(g.Permits, "permit"), ms(g.LeavesInMs))
		}
	}
}

// writeCounting prints a counting semaphore's count.
func writeCounting(w io.Writer, st *countingState) {
	if !st.Set {
		fmt.Fprintf(w, "counting semaphore %q: permits never set\n", st.Name)
		return
	}
	fmt.Fprintf(w, "counting semaphore %q: %s available\n", st.Name, plural(st.Available, "permit"))
}

// writeLatch prints a latch's count, or a count that may be a latch's or
// a semaphore's.
func writeLatch(w io.Writer, st *latchState) {
	switch {
	case st.Value != nil:
		fmt.Fprintf(w, "%q holds the count %d: a semaphore or a counting semaphore with %s available (and none held), or a count-down latch at %d (say which with --kind)\n",
			st.Name, *st.Value, plural(*st.Value, "permit"), *st.Value)
	case *st.Open:
		fmt.Fprintf(w, "count-down latch %q: open (count 0)\n", st.Name)
	default:
		fmt.Fprintf(w, "count-down latch %q: count %d\n", st.Name, *st.Count)
	}
}

// writeWaiters prints the calls that wait for a name, from their wait
// records, longest wait first.
func writeWaiters(w io.Writer, ws []*waiter) {
	if len(ws) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "waiting: %s, longest first\n", plural(int64(len(ws)), "call"))
	for _, wt := range ws {
		fmt.Fprintf(&b, "  %s  %s  waiting %s\n", wt.Field, wt.Kind, ms(wt.WaitingMs))
	}
	io.WriteString(w, b.String())
}
