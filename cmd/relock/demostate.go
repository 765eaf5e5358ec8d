package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// demoState is what the demo knows of its workers, from their events and
// from reading the lock in Redis.
type demoState struct {
	start, stopAt, end time.Time
	interrupted        bool

	workers []*workerState
	byID    map[string]*workerState

	acquisitions int
	handoffs     []time.Duration // release → next acquisition by another worker
	reacquired   int             // acquisitions that followed the same worker's own release
	recent       []handoff       // the last few hand-offs, newest last

	counterViolations int        // acquisitions that found someone else inside
	intervals         []interval // every hold, from acquired to released
	overlaps          int        // holds that began before an earlier one ended (set by finish)

	failures []string // worker errors and unexpected exits
	notes    []string // other messages: log lines, the demo's own
	redis    *lockState
}

type workerState struct {
	id       string
	pid      int
	clientID string
	state    string // starting, waiting, holding, idle, done, failed, exited
	since    time.Time
	n        int
	held     time.Duration
	waits    []time.Duration
	last     time.Duration // its last hand-off latency (0: none yet)
}

type handoff struct {
	from, to string
	latency  time.Duration
}

type interval struct {
	worker     string
	start, end int64 // unix ns
}

// recentHandoffs is how many hand-offs the live view lists.
const recentHandoffs = 4

func newDemoState(procs []*workerProc, start time.Time) *demoState {
	st := &demoState{start: start, byID: make(map[string]*workerState)}
	for _, p := range procs {
		w := &workerState{id: p.id, pid: p.cmd.Process.Pid, state: "starting", since: start}
		st.workers = append(st.workers, w)
		st.byID[p.id] = w
	}
	return st
}

// apply takes in one event of a worker.
func (st *demoState) apply(ev workerEvent) {
	w := st.byID[ev.Worker]
	if w == nil {
		return
	}
	t := time.Unix(0, ev.T)
	switch ev.Kind {
	case "ready":
		w.clientID = ev.ClientID
		w.state, w.since = "idle", t
	case "waiting":
		w.state, w.since = "waiting", t
	case "acquired":
		w.state, w.since = "holding", t
		w.n++
		st.acquisitions++
		w.waits = append(w.waits, time.Duration(ev.WaitNs))
		if ev.Inside != 1 {
			st.counterViolations++
			st.note(fmt.Sprintf("VIOLATION: %s got the lock and found the inside counter at %d", w.id, ev.Inside))
		}
		if ev.Prev != "" {
			lat := time.Duration(ev.HandoffNs)
			if ev.Prev == w.id {
				st.reacquired++
			} else {
				w.last = lat
				st.handoffs = append(st.handoffs, lat)
				st.recent = append(st.recent, handoff{from: ev.Prev, to: w.id, latency: lat})
				if len(st.recent) > recentHandoffs {
					st.recent = st.recent[1:]
				}
			}
		}
	case "released":
		w.state, w.since = "idle", t
		w.held += time.Duration(ev.HeldNs)
		st.intervals = append(st.intervals, interval{worker: w.id, start: ev.T - ev.HeldNs, end: ev.T})
	case "done":
		w.state, w.since = "done", t
	case "error":
		w.state, w.since = "failed", t
		st.failures = append(st.failures, fmt.Sprintf("%s failed: %s", w.id, ev.Msg))
	case "exit":
		if w.state != "done" && w.state != "failed" {
			w.state, w.since = "exited", t
			st.failures = append(st.failures, fmt.Sprintf("%s exited without finishing", w.id))
		}
	case "log":
		st.note(w.id + ": " + ev.Msg)
	}
}

// note records a message for the live view and the summary.
func (st *demoState) note(msg string) {
	st.notes = append(st.notes, msg)
}

// observe takes in a reading of the lock in Redis (nil: it failed).
func (st *demoState) observe(ls *lockState) { st.redis = ls }

// finish checks, once every worker is done, that no two holds overlapped.
func (st *demoState) finish(end time.Time) {
	st.end = end
	sort.Slice(st.intervals, func(i, j int) bool { return st.intervals[i].start < st.intervals[j].start })
	var maxEnd int64
	var maxWorker string
	for i, iv := range st.intervals {
		if i > 0 && iv.start < maxEnd {
			st.overlaps++
			st.note(fmt.Sprintf("VIOLATION: %s's hold began %v before %s's ended", iv.worker, time.Duration(maxEnd-iv.start), maxWorker))
		}
		if iv.end > maxEnd {
			maxEnd, maxWorker = iv.end, iv.worker
		}
	}
}

func (st *demoState) violations() int { return st.counterViolations + st.overlaps }

// percentile is the nearest-rank p-th percentile (0 < p <= 1) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}
