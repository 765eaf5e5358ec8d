// Package integration_test runs relock against several real redis-server
// processes, with faults: killed, paused and restarted masters.
package integration_test

import (
	"testing"

	"github.com/relock-go/relock/integration/internal/rediscontainer"
	"github.com/relock-go/relock/internal/redistest"
)

// TestMain runs Redis in a container when redis-server is not installed
// and a Docker engine answers.
func TestMain(m *testing.M) {
	rediscontainer.Install()
	redistest.Main(m)
}
