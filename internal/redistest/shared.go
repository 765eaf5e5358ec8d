package redistest

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

var shared struct {
	once sync.Once
	srv  *Server
	err  error
}

// Shared returns the test package's own server, started on first use and
// stopped by Main. Tests that kill, pause or restart a server use Start.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	srv, err := SharedServer()
	require.NoError(tb, err, "redistest")
	return srv
}

// SharedServer is Shared for code without a testing.TB, such as examples.
func SharedServer() (*Server, error) {
	shared.once.Do(func() { shared.srv, shared.err = StartServer() })
	return shared.srv, shared.err
}

// Addr is the address of the shared server, for runnable examples (which
// have no testing.T): it exits the process when no server can be started.
func Addr() string {
	srv, err := SharedServer()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	return srv.Addr
}

// Main is the body of a test package's TestMain: it runs the tests, stops
// the shared server, and fails the run if a goroutine outlived its test.
func Main(m *testing.M, opts ...goleak.Option) {
	os.Exit(Run(m, opts...))
}

// Run is Main for a TestMain with its own clean-up: it returns the exit
// code instead of exiting.
func Run(m *testing.M, opts ...goleak.Option) int {
	code := m.Run()
	if shared.srv != nil {
		_ = shared.srv.Stop()
	}
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	return code
}

// ClusterLeftovers are goroutines a closed rueidis cluster client leaves
// for a few seconds (it closes replaced connections, and ends a delayed
// topology refresh, after a sleep). They are rueidis', not the code under
// test's: give these to Main or Run in packages that use cluster clients.
var ClusterLeftovers = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*clusterClient)._refresh.func2"),
	goleak.IgnoreAnyFunction("github.com/redis/rueidis.(*call).DelayDo.func1"),
}
