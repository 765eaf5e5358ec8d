package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
)

// errNoDocker means no Docker engine answered, so there is no fallback for a
// missing redis-server.
var errNoDocker = errors.New("no docker engine")

// dockerImage is the image used when redis-server is not installed.
const dockerImage = "redis:7.0"

// startDocker starts redis in a container when a Docker engine answers.
// Such a server can be stopped but not killed, paused or restarted: the
// tests that need those use a local redis-server.
func startDocker(args ...string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return nil, errNoDocker
	}
	defer provider.Close()
	if provider.Health(ctx) != nil {
		return nil, errNoDocker
	}

	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := append([]string{"redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"}, args...)
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        dockerImage,
			ExposedPorts: []string{"6379/tcp"},
			Cmd:          cmd,
			WaitingFor:   wait.ForListeningPort("6379/tcp"),
		},
		Started: true,
	})
	if err != nil {
		return nil, fmt.Errorf("redis container: %w", err)
	}
	host, err := c.Host(ctx)
	if err == nil && host == "localhost" {
		host = "127.0.0.1"
	}
	port, perr := c.MappedPort(ctx, "6379/tcp")
	if err = errors.Join(err, perr); err != nil {
		_ = c.Terminate(context.Background())
		return nil, fmt.Errorf("redis container address: %w", err)
	}
	s := &Server{Addr: net.JoinHostPort(host, port.Port()), args: args}
	s.Port, _ = strconv.Atoi(port.Port())
	s.stop = func() error { return c.Terminate(context.Background()) }
	return s, nil
}
