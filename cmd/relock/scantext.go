package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/relock-go/relock/internal/layout"
)

// writeScan prints what scan found, for people.
func writeScan(w io.Writer, res *scanResult) {
	var b strings.Builder
	for _, e := range res.locks {
		fmt.Fprintf(&b, "%s  %s", e.Name, e.Kind)
		if e.Mode != "" {
			fmt.Fprintf(&b, " (%s)", e.Mode)
		}
		switch {
		case e.TTLMs >= 0:
			fmt.Fprintf(&b, "  ttl %s", ms(e.TTLMs))
		case len(e.Holders) > 0 && e.Kind != layout.KindSemaphore:
			b.WriteString("  no TTL")
		case len(e.Holders) == 0 && e.Count == nil && e.Permits == nil:
			b.WriteString("  free")
		}
		if e.Permits != nil {
			fmt.Fprintf(&b, "  %s available", plural(*e.Permits, "permit"))
		}
		if e.Count != nil {
			fmt.Fprintf(&b, "  count %d", *e.Count)
		}
		if e.FencingCounter != nil {
			fmt.Fprintf(&b, "  fencing counter %d", *e.FencingCounter)
		}
		if e.Leaked {
			b.WriteString("  LEAKED")
		}
		b.WriteString("\n")
		for _, h := range e.Holders {
			fmt.Fprintf(&b, "  holder %s", h.Field)
			if h.LeaseMs != nil && h.Owner != "" { // a permit, whose taker is recorded
				fmt.Fprintf(&b, " (taken by %s)", layout.Field(h.ClientID, h.Owner))
			}
			if h.Role != "" {
				fmt.Fprintf(&b, " (%s)", h.Role)
			}
			if h.LeaseMs != nil {
				switch {
				case h.LeaseEndedMsAgo != nil:
					fmt.Fprintf(&b, "  lease ended %s ago (back at the next call)", ms(*h.LeaseEndedMsAgo))
				case *h.LeaseMs < 0:
					b.WriteString("  no lease")
				default:
					fmt.Fprintf(&b, "  lease %s left", ms(*h.LeaseMs))
				}
			} else {
				fmt.Fprintf(&b, "  hold count %d", h.HoldCount)
			}
			b.WriteString("\n")
		}
		for _, q := range e.Queue {
			fmt.Fprintf(&b, "  waiter %d. %s", q.Position, q.Field)
			switch {
			case q.RemainingMs == nil:
				b.WriteString("  no deadline")
			case *q.RemainingMs >= 0:
				fmt.Fprintf(&b, "  deadline in %s", ms(*q.RemainingMs))
			default:
				fmt.Fprintf(&b, "  deadline passed %s ago", ms(-*q.RemainingMs))
			}
			b.WriteString("\n")
		}
		for _, l := range e.Leaks {
			fmt.Fprintf(&b, "  leak: %s\n", l)
		}
	}
	io.WriteString(w, b.String())
}
