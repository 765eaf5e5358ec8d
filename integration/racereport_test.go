package integration_test

import (
	"strings"
)

// Race reports of the test processes. A test process built with -race
// reports every race it sees on its standard error; the harness fails a
// test on any report but one: rueidis's recycled command.
//
// rueidis reuses the memory of a command whose reply has come (its
// command builder's pool). Its writer goroutine reads a command after it
// took it from the pipe's ring, and the reader goroutine hands out the
// reply after the server answered: the read ended before the bytes left
// the process, so before the reply, but only the network orders the two,
// which the race detector does not see. When the writer goroutine then
// ends (its connection was killed) without passing another lock, the next
// command built in that memory is reported as a race with the dead
// writer's read. The report is recognized by its two accesses: the
// current one in rueidis's command builder (internal/cmds), the previous
// one by rueidis's writeCmd in the pipe's background writer. Any other
// report, with relock's code or any other of rueidis's, fails the test.

// raceSep frames each report of the race detector.
const raceSep = "=================="

// unexplainedRaces returns the race reports in stderr that are not
// rueidis's recycled command, and how many of those there were.
func unexplainedRaces(stderr string) (reports []string, recycled int) {
	parts := strings.Split(stderr, raceSep)
	for _, p := range parts {
		if !strings.Contains(p, "WARNING: DATA RACE") {
			continue
		}
		if recycledCommand(p) {
			recycled++
			continue
		}
		reports = append(reports, strings.TrimSpace(p))
	}
	return reports, recycled
}

// recycledCommand reports whether one race report is rueidis's recycled
// command (see above).
func recycledCommand(report string) bool {
	cur, prev, ok := strings.Cut(report, "\nPrevious ")
	if !ok {
		return false
	}
	prev, _, _ = strings.Cut(prev, "\nGoroutine ")
	return firstFrame(cur, "WARNING: DATA RACE") == "github.com/redis/rueidis/internal/cmds" &&
		strings.HasPrefix(firstFunc(prev), "github.com/redis/rueidis.writeCmd(") &&
		strings.Contains(prev, "github.com/redis/rueidis.(*pipe)._backgroundWrite(")
}

// firstFrame returns the package of the first frame outside the runtime
// of the access section that follows the line starting with header.
func firstFrame(section, header string) string {
	_, rest, ok := strings.Cut(section, header)
	if !ok {
		return ""
	}
	lines := strings.Split(rest, "\n")
	for _, l := range lines[1:] {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasSuffix(l, ":") || strings.HasPrefix(l, "/") {
			continue // the access line, blank lines and file positions
		}
		if strings.HasPrefix(l, "runtime.") {
			continue
		}
		fn, _, _ := strings.Cut(l, "(")
		// The package is the function's path up to its last
		// element's first dot.
		slash := strings.LastIndex(fn, "/")
		dot := strings.Index(fn[slash+1:], ".")
		if dot < 0 {
			return fn
		}
		return fn[:slash+1+dot]
	}
	return ""
}

// firstFunc returns the first frame of an access section (its first line
// that names a function).
func firstFunc(section string) string {
	for _, l := range strings.Split(section, "\n")[1:] {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "/") {
			return l
		}
	}
	return ""
}
