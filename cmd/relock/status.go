package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/relock-go/relock/internal/lockcore"
)

const statusUsage = `Usage: relock [CONNECTION FLAGS] status [--json] NAME

Show what Redis holds about the lock NAME, read in one transaction: its
holders (hash field <clientID>:<owner> and hold count), its remaining
lease, a fair lock's waiter queue (position, field, and the deadline by
which the waiter must refresh its place, counted on the server's clock),
and the fencing counter (the last token a fenced lock handed out).

--json prints one object with these stable fields:
  name, locked, lease_remaining_ms (0: free, -1: no expiry),
  holders[]{field, client_id, owner, hold_count},
  queue[]{position, field, client_id, owner, deadline_ms, remaining_ms},
  fencing_counter (null if never used), server_time_ms,
  keys{lock, queue, timeout, token, channel}

Exit codes: 0 (whether or not the lock is held), 1 the key is not a lock,
64 bad command line, 69 Redis could not be reached (or refused the
password, or TLS failed).`

func (cl *cli) status(args []string) int {
	fs := cl.newConnFlagSet("status", statusUsage)
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) != 1 {
		return cl.usageError(fs, "status needs exactly one lock NAME (got %d arguments)", len(pos))
	}
	name := pos[0]
	if err := lockcore.CheckName(name); err != nil {
		return cl.usageError(fs, "%v", err)
	}
	rdb, _, code := cl.connect()
	if code >= 0 {
		return code
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := readLockState(ctx, rdb, name)
	if err != nil {
		if errors.Is(err, errNotALock) {
			return cl.errorf(exitFailure, "%v", err)
		}
		return cl.errorf(exitUnavailable, "%v", err)
	}
	if *asJSON {
		enc := json.NewEncoder(cl.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return cl.errorf(exitFailure, "%v", err)
		}
		return exitOK
	}
	writeStatus(cl.stdout, st)
	return exitOK
}

// writeStatus prints st for people.
func writeStatus(w io.Writer, st *lockState) {
	var b strings.Builder
	switch {
	case !st.Locked:
		fmt.Fprintf(&b, "lock %q: free\n", st.Name)
	case st.LeaseRemainingMs < 0:
		fmt.Fprintf(&b, "lock %q: held, no lease (the key never expires)\n", st.Name)
	default:
		fmt.Fprintf(&b, "lock %q: held, lease %s left\n", st.Name, ms(st.LeaseRemainingMs))
	}
	for _, h := range st.Holders {
		fmt.Fprintf(&b, "  holder %s  hold count %d\n", h.Field, h.HoldCount)
	}
	if len(st.Queue) == 0 {
		b.WriteString("fair queue: empty\n")
	} else {
		fmt.Fprintf(&b, "fair queue: %d waiting, head first\n", len(st.Queue))
		for _, q := range st.Queue {
			fmt.Fprintf(&b, "  %d. %s  ", q.Position, q.Field)
			switch {
			case q.RemainingMs == nil:
				b.WriteString("no deadline\n")
			case *q.RemainingMs >= 0:
				fmt.Fprintf(&b, "deadline in %s\n", ms(*q.RemainingMs))
			default:
				fmt.Fprintf(&b, "deadline passed %s ago (dropped when it reaches the head)\n", ms(-*q.RemainingMs))
			}
		}
	}
	if st.FencingCounter == nil {
		b.WriteString("fencing counter: none\n")
	} else {
		fmt.Fprintf(&b, "fencing counter: %d\n", *st.FencingCounter)
	}
	io.WriteString(w, b.String())
}

// ms formats a count of milliseconds for people: "950ms", "28.4s", "5m0s".
func ms(n int64) string {
	return human(time.Duration(n) * time.Millisecond)
}

// human rounds d for display: "0.42ms", "950ms", "28.4s".
func human(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + human(-d)
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Second).String()
}
