package main

import (
	"fmt"
	"time"
)

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

// plural is "1 permit", "2 permits", "0 permits".
func plural(n int64, noun string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
