// Package rediscontainer runs Redis in a container with testcontainers-go,
// as the integration tests' fallback when redis-server is not installed and
// a Docker engine answers. Install makes it redistest's Fallback.
package rediscontainer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/relock-go/relock/internal/redistest"
)

// Image is the image of the containers.
const Image = "redis:7.0"

// Install makes Start the fallback of internal/redistest. Call it from
// TestMain, before any test starts a server.
func Install() { redistest.Fallback = Start }

// Start starts a Redis container with args as redis-server command-line
// options, and returns its address and a function that removes it. When no
// Docker engine answers, the error matches redistest.ErrNoFallback.
//
// Such a server can be stopped but not killed, paused or restarted: the
// tests that need those use a local redis-server.
func Start(args ...string) (addr string, stop func() error, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	provider, err := testcontainers.NewDockerProvider()
	if err != nil {
		return "", nil, fmt.Errorf("%w: %v", redistest.ErrNoFallback, err)
	}
	defer provider.Close()
	if err := provider.Health(ctx); err != nil {
		return "", nil, fmt.Errorf("%w: no Docker engine: %v", redistest.ErrNoFallback, err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := append([]string{"redis-server", "--save", "", "--appendonly", "no", "--protected-mode", "no"}, args...)
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:        Image,
			ExposedPorts: []string{"6379/tcp"},
			Cmd:          cmd,
			WaitingFor:   wait.ForListeningPort("6379/tcp"),
		},
		Started: true,
	})
	if err != nil {
		return "", nil, fmt.Errorf("redis container: %w", err)
	}
	terminate := func() error { return c.Terminate(context.Background()) }
	host, err := c.Host(ctx)
	if err == nil && host == "localhost" {
		host = "127.0.0.1"
	}
	port, perr := c.MappedPort(ctx, "6379/tcp")
	if err = errors.Join(err, perr); err != nil {
		_ = terminate()
		return "", nil, fmt.Errorf("redis container address: %w", err)
	}
	return net.JoinHostPort(host, port.Port()), terminate, nil
}
