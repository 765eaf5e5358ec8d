package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// The tables of the sections, made from their results alone, so that a
// results file written earlier gives the same tables as the run did (the
// docs page is made from the file).

var measureColumns = []string{"measure", "value", "target"}

// sectionTable returns the columns and rows of s's table, from its results.
func sectionTable(s *section) (columns []string, rows [][]string, err error) {
	switch s.ID {
	case "uncontended", "throughput":
		res, err := decodeResults[[]*lockRow](s)
		return loopColumns, loopTable(res), err
	case "contention", "clients16", "waiters100", "fair":
		res, err := decodeResults[[]*lockRow](s)
		return contendedColumns, contendedTable(res), err
	case "redlock":
		res, err := decodeResults[*redlockResult](s)
		if err != nil || res == nil {
			return nil, nil, err
		}
		return redlockColumns, loopTable(res.Rows), nil
	case "waiters":
		res, err := decodeResults[*waitersResult](s)
		if err != nil || res == nil {
			return nil, nil, err
		}
		return measureColumns, waitersTable(res), nil
	case "waiters10k":
		res, err := decodeResults[*manyLocksResult](s)
		if err != nil || res == nil {
			return nil, nil, err
		}
		return measureColumns, manyLocksTable(res), nil
	case "watchdog":
		res, err := decodeResults[*watchdogResult](s)
		if err != nil || res == nil {
			return nil, nil, err
		}
		return measureColumns, watchdogTable(res), nil
	case "rwlock":
		res, err := decodeResults[[]*syncRow](s)
		return rwColumns, rwTable(res), err
	case "permits":
		res, err := decodeResults[[]*syncRow](s)
		return permitsColumns, permitsTable(res), err
	}
	return nil, nil, fmt.Errorf("section %q: no table for it", s.ID)
}

// decodeResults returns s's results as a T: the value a scenario stored,
// or what a results file holds (decoded from JSON into any).
func decodeResults[T any](s *section) (T, error) {
	var v T
	if s.Results == nil {
		return v, nil
	}
	if t, ok := s.Results.(T); ok {
		return t, nil
	}
	b, err := json.Marshal(s.Results)
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		return v, fmt.Errorf("section %q: %w", s.ID, err)
	}
	return v, nil
}

var redlockColumns = append([]string{"impl", "ops/s", "p50", "p99", "vs single"}, loopColumns[5:]...)

var (
	rwColumns      = []string{"impl", "reads", "ops/s", "read p50", "read p99", "write p50", "write p99", "errors"}
	permitsColumns = []string{"impl", "hand-offs/s", "hand-off p50", "hand-off p99", "errors"}
)

func rwTable(rows []*syncRow) [][]string {
	var out [][]string
	for _, row := range rows {
		reads := "-"
		if row.ReadShare > 0 {
			reads = fmt.Sprintf("%.0f%%", row.ReadShare*100)
		}
		out = append(out, []string{row.Impl, reads, fmtRate(row.OpsPerSec),
			fmtDur(usDur(row.ReadP50us)), fmtDur(usDur(row.ReadP99us)),
			fmtDur(usDur(row.WriteP50us)), fmtDur(usDur(row.WriteP99us)), syncErrText(row)})
	}
	return out
}

func permitsTable(rows []*syncRow) [][]string {
	var out [][]string
	for _, row := range rows {
		out = append(out, []string{row.Impl, fmtRate(row.OpsPerSec), fmtDur(usDur(row.HandoffP50us)),
			fmtDur(usDur(row.HandoffP99us)), syncErrText(row)})
	}
	return out
}

func waitingText(all bool) string {
	if all {
		return "yes"
	}
	return "NO (timed out waiting for 2 attempts each)"
}

func waitersTable(res *waitersResult) [][]string {
	return [][]string{
		{"all waiting (2 attempts each) after", fmt.Sprintf("%.2fs", res.SetupSeconds) + ", " + waitingText(res.AllWaiting), ""},
		{"subscribed channels (PUBSUB CHANNELS)", strconv.Itoa(res.SubscribedChannels), "1"},
		{"subscribers of the lock's channel (PUBSUB NUMSUB)", strconv.FormatInt(res.ChannelSubscribers, 10), "1"},
		{"the Client's connections (CLIENT LIST name=)", fmt.Sprintf("%d (%d subscribed)", res.ClientConnections, res.SubscribedConns), "<= 2"},
		{"hand-offs", fmtInt(res.Handoffs), ""},
		{"hand-offs/s", fmtRate(res.HandoffsPerSec), ""},
		{"hand-off p50 / p99", fmtDur(usDur(res.HandoffP50us)) + " / " + fmtDur(usDur(res.HandoffP99us)), ""},
		{"acquire scripts per hand-off (client count)", fmt.Sprintf("%.2f", res.AcquiresPerHandoff), "< 3"},
		{"acquire scripts per hand-off (server EVALSHA - unlocks)", fmt.Sprintf("%.2f", res.ServerScriptsPerHand), "< 3"},
		{"redis calls per hand-off (inside scripts too)", fmt.Sprintf("%.2f", res.ServerCallsPerHand), ""},
		{"redis CPU per hand-off (INFO cpu)", fmtCPU(res.ServerCPUusPerHand), ""},
		{"mutual-exclusion violations", fmtInt(res.Violations), "0"},
		{"errors", fmt.Sprint(res.Errors), "0"},
	}
}

func manyLocksTable(res *manyLocksResult) [][]string {
	return [][]string{
		{"all waiting (2 attempts each) after", fmt.Sprintf("%.2fs", res.SetupSeconds) + ", " + waitingText(res.AllWaiting), ""},
		{"memory per waiter, heap+stack", fmtBytes(res.PerWaiterBytes), ""},
		{"memory per waiter, heap only", fmtBytes(res.PerWaiterHeapBytes), ""},
		{"idle goroutine baseline, heap+stack (heap)", fmtBytes(res.IdleGoroutineBytes) + " (" + fmtBytes(res.IdleGoroutineHeap) + ")", ""},
		{"library's share per waiter (difference), heap+stack", fmtBytes(res.LibraryPerWaiter), ""},
		{"library's share per waiter (difference), heap only", fmtBytes(res.LibraryHeapPerWait), "< 1 KiB"},
		{"subscribed channels", fmtInt(int64(res.SubscribedChannels)), fmtInt(int64(res.Waiters))},
		{"the Client's connections (subscribed)", fmt.Sprintf("%d (%d)", res.ClientConnections, res.SubscribedConns), "1 subscription connection"},
		{"cancel every wait", fmt.Sprintf("%.2fs", res.CancelSeconds), ""},
		{"errors", fmt.Sprint(res.Errors), "0"},
	}
}

// watchdogWorkers is how many goroutines take the locks of scenario 5c.
const watchdogWorkers = 64

func watchdogTable(res *watchdogResult) [][]string {
	perPipe := res.CommandsPerPipeline
	if perPipe == 0 && res.PipelinesPerSec > 0 {
		// Results written before the count was kept: the pipelines carry
		// the renewals and nothing else.
		perPipe = res.RenewalsPerSec / res.PipelinesPerSec
	}
	rate := 0.0
	if res.AcquireSeconds > 0 {
		rate = float64(res.Locks) / res.AcquireSeconds
	}
	return [][]string{
		{"acquire all", fmt.Sprintf("%.2fs (%s locks/s, %d goroutines)", res.AcquireSeconds, fmtRate(rate), watchdogWorkers), ""},
		{"memory per held lock, heap+stack (heap)", fmtBytes(res.PerLockBytes) + " (" + fmtBytes(res.PerLockHeapBytes) + ")", "< 1 KiB"},
		{"process CPU (user+sys / wall)", fmt.Sprintf("%.1f%% of one core", 100*res.CPUShare), ""},
		{"redis-server CPU", fmt.Sprintf("%.1f%% of one core", 100*res.RedisCPUShare), ""},
		{"renewals/s (scripts in pipelines)", fmtRate(res.RenewalsPerSec), fmt.Sprintf("%s (locks / renewal interval)", fmtRate(res.ExpectedRenewals))},
		{"pipelines/s (DoMulti), scripts per pipeline", fmt.Sprintf("%s, %.0f", fmtRate(res.PipelinesPerSec), perPipe), ""},
		{"round trips/s (Do + DoMulti calls)", fmtRate(res.RoundTripsPerSec), "far fewer than renewals/s"},
		{"server: commands/s, EVALSHA/s, SCRIPT LOAD/s", fmt.Sprintf("%s, %s, %s", fmtRate(res.ServerCmdsPerSec), fmtRate(res.ServerEvalPerSec), fmtRate(res.ScriptLoadPerSec)), ""},
		{"holds lost", fmtInt(res.Lost), "0"},
		{"min remaining lease of 100 sampled locks", fmtDur(time.Duration(res.MinRemainingMs) * time.Millisecond), "> 0"},
		{"Close with every lock held", fmt.Sprintf("%.2fs", res.CloseSeconds), ""},
		{"errors", fmt.Sprint(res.Errors), "0"},
	}
}
