package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// ANSI escape sequences for the terminal view.
const (
	ansiHideCursor = "\x1b[?25l"
	ansiShowCursor = "\x1b[?25h"
	ansiClearLine  = "\x1b[2K"
	ansiClearBelow = "\x1b[J"
	ansiReset      = "\x1b[0m"
	ansiBold       = "\x1b[1m"
	ansiDim        = "\x1b[2m"
	ansiRed        = "\x1b[31m"
	ansiGreen      = "\x1b[32m"
	ansiYellow     = "\x1b[33m"
)

// view shows a demo: on a terminal a block redrawn in place, else a line
// a second.
type view struct {
	d   *demo
	st  *demoState
	out io.Writer

	drawn   int  // lines of the block on screen (terminal)
	hidden  bool // the cursor is hidden
	noteOut int  // notes printed so far (plain)

	lastAcq      int // acquisitions at the last line (plain)
	lastHandoffs int
}

func newView(d *demo, st *demoState) *view {
	return &view{d: d, st: st, out: d.cl.stdout}
}

func (v *view) begin() {
	if v.d.tty {
		io.WriteString(v.out, ansiHideCursor)
		v.hidden = true
	}
}

// end gives the cursor back; it is safe to call more than once.
func (v *view) end() {
	if v.hidden {
		io.WriteString(v.out, ansiShowCursor)
		v.hidden = false
	}
}

// event is called after each event; plain output prints notes at once.
func (v *view) event(workerEvent) {
	if !v.d.tty {
		v.printNotes()
	}
}

func (v *view) tick() {
	if v.d.tty {
		v.draw(v.block(time.Now()))
		return
	}
	v.line(time.Now())
}

// final shows the state at the end.
func (v *view) final() {
	if v.d.tty {
		v.draw(v.block(v.st.end))
		return
	}
	v.printNotes()
	if v.st.acquisitions != v.lastAcq {
		v.line(v.st.end)
	}
}

func (v *view) paint(code, s string) string {
	if !v.d.color || code == "" {
		return s
	}
	return code + s + ansiReset
}

// draw replaces the block on screen with lines.
func (v *view) draw(lines []string) {
	var b strings.Builder
	if v.drawn > 0 {
		fmt.Fprintf(&b, "\x1b[%dA\r", v.drawn)
	}
	for _, l := range lines {
		b.WriteString(ansiClearLine + l + "\n")
	}
	b.WriteString(ansiClearBelow)
	v.drawn = len(lines)
	io.WriteString(v.out, b.String())
}

// block is the terminal view at now. Lines stay under 80 columns.
func (v *view) block(now time.Time) []string {
	st, d := v.st, v.d
	elapsed := now.Sub(st.start)
	if !st.stopAt.IsZero() && now.After(st.stopAt) {
		elapsed = st.stopAt.Sub(st.start)
	}
	const barWidth = 24
	filled := min(barWidth, int(float64(barWidth)*elapsed.Seconds()/d.duration.Seconds()))
	bar := v.paint(ansiGreen, strings.Repeat("█", filled)) + v.paint(ansiDim, strings.Repeat("░", barWidth-filled))
	status := fmt.Sprintf("%5.1fs of %v", elapsed.Seconds(), d.duration)
	switch {
	case !st.end.IsZero() && st.interrupted:
		status += "  interrupted"
	case !st.end.IsZero():
		status += "  finished"
	case !st.stopAt.IsZero():
		status += "  stopping workers…"
	}
	lines := []string{
		"  " + bar + "  " + status,
		"",
		v.paint(ansiBold, "  worker      pid  state           locks  wait p50  last hand-off"),
	}
	for _, w := range st.workers {
		state := w.state
		code := ""
		switch w.state {
		case "holding":
			state, code = "HOLDING", ansiGreen+ansiBold
		case "waiting":
			code = ansiYellow
		case "idle", "done":
			code = ansiDim
		case "failed", "exited":
			code = ansiRed
		}
		if w.state == "holding" || w.state == "waiting" {
			state = fmt.Sprintf("%-8s%6s", state, shortDur(now.Sub(w.since)))
		}
		last := "-"
		if w.last > 0 {
			last = human(w.last)
		}
		lines = append(lines, fmt.Sprintf("  %-6s %8d  %s  %5d  %8s  %s",
			w.id, w.pid, v.paint(code, fmt.Sprintf("%-14s", state)), w.n, human(percentile(w.waits, 0.5)), last))
	}
	lines = append(lines, "", v.redisLine(), v.queueLine())
	viol := v.paint(ansiGreen, "0")
	if n := st.violations(); n > 0 {
		viol = v.paint(ansiRed+ansiBold, fmt.Sprint(n))
	}
	lines = append(lines, fmt.Sprintf("  hand-offs %-5d p50 %-8s p99 %-8s max %-8s violations %s",
		len(st.handoffs), human(percentile(st.handoffs, 0.5)), human(percentile(st.handoffs, 0.99)),
		human(percentile(st.handoffs, 1)), viol))
	var recent []string
	for i := len(st.recent) - 1; i >= 0; i-- {
		h := st.recent[i]
		recent = append(recent, fmt.Sprintf("%s→%s %s", h.from, h.to, human(h.latency)))
	}
	lines = append(lines, "  latest    "+strings.Join(recent, "   "))
	notes := st.notes
	if len(notes) > 3 {
		notes = notes[len(notes)-3:]
	}
	for _, n := range notes {
		lines = append(lines, "  "+v.paint(ansiRed, clip(n, 76)))
	}
	return lines
}

// redisLine says who holds the lock according to Redis.
func (v *view) redisLine() string {
	ls := v.st.redis
	switch {
	case ls == nil:
		return "  in Redis  (not read yet)"
	case !ls.Locked:
		return "  in Redis  free"
	}
	var hs []string
	for _, h := range ls.Holders {
		hs = append(hs, fmt.Sprintf("%s (hold count %d)", h.Owner, h.HoldCount))
	}
	return fmt.Sprintf("  in Redis  held by %s, lease %s", strings.Join(hs, ", "), ms(ls.LeaseRemainingMs))
}

// queueLine shows the fair queue, or says why a plain lock has none.
func (v *view) queueLine() string {
	if !v.d.fair {
		return "  queue     none in Redis: a plain lock's waiters sleep on pub/sub"
	}
	ls := v.st.redis
	if ls == nil || len(ls.Queue) == 0 {
		return "  queue     empty"
	}
	var q []string
	for _, w := range ls.Queue {
		q = append(q, w.Owner)
	}
	q[0] += " (head)"
	return "  queue     " + strings.Join(q, ", ")
}

// line prints the plain view of the last second.
func (v *view) line(now time.Time) {
	st := v.st
	var holder, waiting []string
	for _, w := range st.workers {
		switch w.state {
		case "holding":
			holder = append(holder, w.id)
		case "waiting":
			waiting = append(waiting, w.id)
		}
	}
	fresh := st.handoffs[v.lastHandoffs:]
	hand := "no hand-offs"
	if len(fresh) > 0 {
		hand = fmt.Sprintf("%d hand-offs p50 %s max %s", len(fresh), human(percentile(fresh, 0.5)), human(percentile(fresh, 1)))
	}
	fmt.Fprintf(v.out, "%5.1fs  holder %-3s waiting %-12s locks %4d (+%d)  %s  violations %d\n",
		now.Sub(st.start).Seconds(), orDash(holder), orDash(waiting), st.acquisitions, st.acquisitions-v.lastAcq, hand, st.violations())
	v.lastAcq, v.lastHandoffs = st.acquisitions, len(st.handoffs)
}

func (v *view) printNotes() {
	for ; v.noteOut < len(v.st.notes); v.noteOut++ {
		fmt.Fprintf(v.out, "  note: %s\n", v.st.notes[v.noteOut])
	}
}

// summary prints the outcome and reports whether it is a success: no
// violation and no failed worker.
func (v *view) summary() bool {
	st, d := v.st, v.d
	ran := st.end.Sub(st.start)
	if !st.stopAt.IsZero() {
		ran = st.stopAt.Sub(st.start)
	}
	kind := "plain"
	if d.fair {
		kind = "fair"
	}
	var b strings.Builder
	how := ""
	if st.interrupted {
		how = ", interrupted"
	}
	fmt.Fprintf(&b, "summary: %s lock, %d worker processes, %.1fs%s\n", kind, len(st.workers), ran.Seconds(), how)
	fmt.Fprintf(&b, "  worker  locks  share    held  wait p50  wait p99\n")
	for _, w := range st.workers {
		share := 0.0
		if st.acquisitions > 0 {
			share = 100 * float64(w.n) / float64(st.acquisitions)
		}
		fmt.Fprintf(&b, "  %-6s %6d  %4.0f%%  %6s  %8s  %8s\n", w.id, w.n, share,
			human(w.held), human(percentile(w.waits, 0.5)), human(percentile(w.waits, 0.99)))
	}
	rate := 0.0
	if ran > 0 {
		rate = float64(st.acquisitions) / ran.Seconds()
	}
	fmt.Fprintf(&b, "  total  %6d  (%.0f per second)\n", st.acquisitions, rate)
	fmt.Fprintf(&b, "hand-offs: %d to another worker, %d back to the worker that released\n", len(st.handoffs), st.reacquired)
	if len(st.handoffs) > 0 {
		fmt.Fprintf(&b, "hand-off latency (release to the next holder's Lock returning): p50 %s  p99 %s  max %s\n",
			human(percentile(st.handoffs, 0.5)), human(percentile(st.handoffs, 0.99)), human(percentile(st.handoffs, 1)))
	}
	if !d.fair && len(st.workers) > 1 {
		b.WriteString("(a plain lock promises no order among waiters, hence the uneven shares; --fair queues them)\n")
	}
	if !d.tty {
		v.printNotes()
	}
	for _, f := range st.failures {
		fmt.Fprintf(&b, "FAILED: %s\n", f)
	}
	n := st.violations()
	verdict := "the inside counter was always 1 and no two holds overlapped"
	if n > 0 {
		verdict = fmt.Sprintf("%d times a worker found someone inside, %d overlapping holds", st.counterViolations, st.overlaps)
	}
	fmt.Fprintf(&b, "violations: %d (%s)\n", n, verdict)
	io.WriteString(v.out, b.String())
	return n == 0 && len(st.failures) == 0
}

// shortDur is a compact duration for the state column: "12ms", "1.2s".
func shortDur(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func orDash(ids []string) string {
	if len(ids) == 0 {
		return "-"
	}
	return strings.Join(ids, ",")
}

// clip shortens s to n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
