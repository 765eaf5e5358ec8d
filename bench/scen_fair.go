package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/relock-go/relock/rlock"
)

// The fair lock's hand-off, before and after grant on release (issue 35).

// fairImpl is a relock Client whose handles are fair locks.
type fairImpl struct{ c *rlock.Client }

// openFair opens a relock Client with opts whose handles are fair locks.
func openFair(opts ...rlock.Option) func(addr string, w *wire) (impl, error) {
	return func(addr string, w *wire) (impl, error) {
		c, err := rlock.NewClient(w.rueidisOption(addr), opts...)
		if err != nil {
			return nil, err
		}
		return fairImpl{c}, nil
	}
}

func (f fairImpl) locker(name string) locker { return f.c.GetFairLock(name) }
func (f fairImpl) close()                    { _ = f.c.Close() }

// fairPeers are the rows of the fair scenario, named with suffix: relock's
// fair lock without grant on release when relock/no-grant is selected, and
// with it (the defaults) when relock is.
func (r *run) fairPeers(suffix string) []peer {
	var ps []peer
	for _, p := range r.peers {
		switch p.name {
		case "relock/no-grant":
			ps = append(ps, peer{name: "relock fair/no-grant" + suffix, exclusive: true, open: openFair(noGrant()...)})
		case "relock":
			ps = append(ps, peer{name: "relock fair" + suffix, exclusive: true, open: openFair()})
		}
	}
	return ps
}

// noGrantNotes say what the no-grant rows are.
func noGrantNotes() []string {
	notes := []string{"no-grant rows: the same Client without grant on release (rlock.WithoutGrantOnRelease()): " +
		"a release publishes and the woken waiter acquires with a round trip of its own, as before issue 35; " +
		"they are the \"before\" beside the \"after\" of the rows without the suffix, measured in the same interleaved rounds"}
	if !grantSwitchable() {
		notes = append(notes, "this build of the benchmark program has no grant on release to turn off: its no-grant rows are the same as their grant rows")
	}
	return notes
}

func (r *run) fair(ctx context.Context) *section {
	n, clients, hold := r.cfg.Contenders, r.cfg.Clients, r.cfg.Hold
	s := &section{
		ID: "fair",
		Title: fmt.Sprintf("4c. Fair lock: %d goroutines of one client, then %d separate clients, on one fair lock, each holding it %v, %v and %v each",
			n, clients, hold, r.cfg.Duration, r.cfg.ClientsDuration),
		Columns: contendedColumns,
	}
	one, many := r.fairPeers(", 1 client"), r.fairPeers(fmt.Sprintf(", %d clients", clients))
	if len(one) == 0 {
		s.Skipped = "neither relock nor relock/no-grant is selected (-peers)"
		return s
	}
	r.ensureLimit1(ctx, "fair")
	rows := r.contendedRows(ctx, one, n, 1, hold, r.cfg.Duration, "fair")
	for _, row := range r.contendedRows(ctx, many, clients, clients, hold, r.cfg.ClientsDuration, "fair16") {
		if !row.Reference {
			rows = append(rows, row)
		}
	}
	s.Results = rows
	s.Rows = contendedTable(rows)
	s.Notes = append(s.Notes,
		"relock's fair lock (Client.GetFairLock): waiters take the lock in the order they asked; a release wakes the head of the queue alone",
		fmt.Sprintf("the first rows as scenario 3 (%d goroutines of one client), the rows \", %d clients\" as scenario 4a (one goroutine each of %d clients)", n, clients, clients),
		"no yardstick: minimal, like the peers, has no fair lock; the limit row (two no-op script round trips in a row) and the plain locks of scenarios 3 and 4a are what to compare with",
		"hand-off latency: from just before the holder's Unlock call to the next holder's Lock returning; p50 vs limit: lower is better")
	s.Notes = append(s.Notes, noGrantNotes()...)
	s.Notes = append(s.Notes, countNotes...)
	s.Notes = append(s.Notes, breakdown(rows, "acquisition")...)
	r.violationGoal("fair lock: mutual-exclusion violations", rows)
	var got []string
	for _, suffix := range []string{", 1 client", fmt.Sprintf(", %d clients", clients)} {
		ng, g := find(rows, "relock fair/no-grant"+suffix), find(rows, "relock fair"+suffix)
		if ng != nil && g != nil && ng.Handoffs > 0 && g.Handoffs > 0 {
			got = append(got, fmt.Sprintf("%s: %s with, %s without (%.2fx)", suffix[2:],
				fmtDur(usDur(g.HandoffP50us)), fmtDur(usDur(ng.HandoffP50us)), ng.HandoffP50us/g.HandoffP50us))
		}
	}
	if len(got) > 0 {
		r.goal("fair lock: hand-off p50 with grant on release vs without (without/with)", "(reported)", strings.Join(got, "; "), true)
	}
	return s
}
