// Package integration_test runs relock against several real redis-server
// processes, with faults: killed, paused and restarted masters.
package integration_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/relock-go/relock/integration/internal/rediscontainer"
	"github.com/relock-go/relock/internal/redistest"
)

// TestMain runs Redis in a container when redis-server is not installed
// and a Docker engine answers. After the tests, it appends what they
// skipped (relSkipNotCovered) to the file named by RELOCK_SKIP_REPORT, if
// set: go test shows a passing package's skips only with -v, and test.sh
// prints that file, so that a run's log says what it did not cover.
func TestMain(m *testing.M) {
	rediscontainer.Install()
	// Read before the tests run, so that go test's cache knows of it: a
	// cached result would write no report.
	path := os.Getenv("RELOCK_SKIP_REPORT")
	code := redistest.Run(m)
	if path != "" && len(relSkips.list) > 0 {
		if err := relWriteSkips(path); err != nil {
			fmt.Fprintf(os.Stderr, "skip report: %v\n", err)
		}
	}
	os.Exit(code)
}

var relSkips struct {
	sync.Mutex
	list []string
}

// relSkipNotCovered skips t, saying what the run does not cover and why,
// and records it for the skip report.
func relSkipNotCovered(t *testing.T, what string) {
	t.Helper()
	relSkips.Lock()
	relSkips.list = append(relSkips.list, t.Name()+": "+what)
	relSkips.Unlock()
	t.Skip("not covered: " + what)
}

func relWriteSkips(path string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	for _, s := range relSkips.list {
		fmt.Fprintf(f, "integration: skipped %s\n", s)
	}
	return f.Close()
}
