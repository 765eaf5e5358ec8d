package main

import (
	"context"
	"fmt"
)

// handoffPeers are the implementations of the scenarios with a client per
// goroutine: the exclusive ones but relock/lease, which waits as relock
// does and differs only in renewals, which a hand-off does not reach.
func (r *run) handoffPeers(scenario string) []peer {
	var ps []peer
	for _, p := range r.exclusivePeers(scenario) {
		if p.name != "relock/lease" {
			ps = append(ps, p)
		}
	}
	return ps
}

// clientsNotes say how the scenarios with a client per goroutine run.
func clientsNotes(n int) []string {
	return []string{
		fmt.Sprintf("%d client instances in this one process (goroutines, not processes), one goroutine each: each its own rueidis or go-redis client and its own lock-library client (its own connections, subscriptions and background work), as %d processes would have; they share only the server", n, n),
		"a goroutine that released the lock asks again only once another has taken it: every acquisition is a hand-off; hand-off latency: from just before the holder's Unlock call to the next holder's Lock returning",
		"before the measured rounds every implementation contends unmeasured for 200ms, so that every client has its connections and subscriptions",
		fmt.Sprintf("redsync and bsm poll (redsync: retry after a random 50-250ms; bsm: every %v); relock/lease is left out (it waits as relock does)", bsmBackoff),
	}
}

func (r *run) clients16(ctx context.Context) *section {
	n, hold, d := r.cfg.Clients, r.cfg.Hold, r.cfg.ClientsDuration
	s := &section{
		ID:      "clients16",
		Title:   fmt.Sprintf("4a. %d separate clients on one key: one goroutine each, holding it %v, %v each", n, hold, d),
		Columns: contendedColumns,
	}
	r.ensureLimit1(ctx, "clients16")
	rows := r.contendedRows(ctx, r.handoffPeers("clients16"), n, n, hold, d, "clients16")
	s.Results = rows
	s.Rows = contendedTable(rows)
	s.Notes = append(s.Notes, clientsNotes(n)...)
	s.Notes = append(s.Notes, "the same as scenario 3 but for the clients: compare the two to see what separate processes cost")
	s.Notes = append(s.Notes, noGrantNotes()...)
	s.Notes = append(s.Notes, countNotes...)
	s.Notes = append(s.Notes, breakdown(rows, "acquisition")...)
	r.violationGoal(fmt.Sprintf("%d clients: mutual-exclusion violations", n), rows)
	if wo := find(rows, "relock/wake-one"); wo != nil && wo.Ops > 0 {
		if one := r.oneClient; one != nil && one.Ops > 0 {
			ratio := wo.OpsPerSec / one.OpsPerSec
			r.goal(fmt.Sprintf("wake-one, %d clients vs one client's %d goroutines (scenario 3)", n, r.cfg.Contenders), ">= 0.80x",
				fmt.Sprintf("%.2fx (%s vs %s acquisitions/s)", ratio, fmtRate(wo.OpsPerSec), fmtRate(one.OpsPerSec)), ratio >= 0.8)
		}
		r.goal(fmt.Sprintf("wake-one, %d clients: client commands per acquisition", n), "<= 5",
			fmt.Sprintf("%.2f", wo.CmdsPerOp), wo.CmdsPerOp <= 5)
	}
	r.clientsGrantGoals(n, rows)
	return s
}

// clientsGrantGoals records the goal of grant on release (issue 35) for n
// clients: the hand-off p50 of relock's better grant row (relock or
// relock/wake-one) at least 1.5x faster than relock/no-grant's, and than
// relock/wake-one's of the -before results file when one was given.
func (r *run) clientsGrantGoals(n int, rows []*lockRow) {
	var after *lockRow
	for _, impl := range []string{"relock", "relock/wake-one"} {
		if row := find(rows, impl); row != nil && row.Handoffs > 0 && (after == nil || row.HandoffP50us < after.HandoffP50us) {
			after = row
		}
	}
	if after == nil {
		return
	}
	faster := func(name, beforeName string, before *lockRow, more string) {
		if before == nil || before.Handoffs == 0 || before.HandoffP50us <= 0 {
			return
		}
		ratio := before.HandoffP50us / after.HandoffP50us
		r.goal(name, ">= 1.5x faster",
			fmt.Sprintf("%.2fx (%s %s vs %s %s%s)", ratio, after.Impl, fmtDur(usDur(after.HandoffP50us)),
				beforeName, fmtDur(usDur(before.HandoffP50us)), more), ratio >= 1.5)
	}
	more := ""
	if ng := find(rows, "relock/wake-one/no-grant"); ng != nil && ng.Handoffs > 0 {
		more = "; relock/wake-one/no-grant " + fmtDur(usDur(ng.HandoffP50us))
	}
	faster(fmt.Sprintf("%d clients: hand-off p50 vs relock/no-grant (before grant on release)", n),
		"relock/no-grant", find(rows, "relock/no-grant"), more)
	if r.before != nil {
		if s := findSection(r.before, "clients16"); s != nil && s.Skipped == "" {
			old, err := decodeResults[[]*lockRow](s)
			if err != nil {
				r.logf("-before: %v", err)
				return
			}
			run := "the " + r.before.Started.UTC().Format("2006-01-02") + " run"
			faster(fmt.Sprintf("%d clients: hand-off p50 vs relock/wake-one of %s (-before %s)", n, run, r.cfg.Before),
				"relock/wake-one of "+run, find(old, "relock/wake-one"), "")
		}
	}
}

func (r *run) waiters100(ctx context.Context) *section {
	n, d := r.cfg.WaiterClients, r.cfg.ClientsDuration
	s := &section{
		ID: "waiters100",
		Title: fmt.Sprintf("4b. %d clients' waiters on one key: each takes the lock, releases it at once and waits again, %v each",
			n, d),
		Columns: contendedColumns,
	}
	r.ensureLimit1(ctx, "waiters100")
	rows := r.contendedRows(ctx, r.handoffPeers("waiters100"), n, n, 0, d, "waiters100")
	s.Results = rows
	s.Rows = contendedTable(rows)
	s.Notes = append(s.Notes, clientsNotes(n)...)
	s.Notes = append(s.Notes,
		fmt.Sprintf("what a hand-off costs while %d clients wait: the per-acquisition figures are per hand-off", n-1))
	s.Notes = append(s.Notes, countNotes...)
	s.Notes = append(s.Notes, breakdown(rows, "hand-off")...)
	r.violationGoal(fmt.Sprintf("%d clients' waiters: mutual-exclusion violations", n), rows)
	return s
}
