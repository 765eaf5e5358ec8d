// Package integration_test runs relock against several real redis-server
// processes, with faults: killed, paused and restarted masters.
package integration_test

import (
	"testing"

	"github.com/relock-go/relock/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
