package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// dialTimeout bounds connecting to Redis.
const dialTimeout = 3 * time.Second

// clientOption is how every subcommand connects to addr. Client-side
// caching is off: relock reads lock state that other clients change.
func clientOption(addr string) rueidis.ClientOption {
	return rueidis.ClientOption{
		InitAddress:  []string{addr},
		DisableCache: true,
		Dialer:       net.Dialer{Timeout: dialTimeout},
	}
}

// connect returns a rueidis client of addr; the caller closes it.
func connect(addr string) (rueidis.Client, error) {
	rdb, err := rueidis.NewClient(clientOption(addr))
	if err != nil {
		return nil, fmt.Errorf("cannot connect to Redis at %s: %w", addr, err)
	}
	return rdb, nil
}

// ping sends one PING to addr on a plain connection and reports whether
// +PONG came back within timeout.
func ping(addr string, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// shortContext is a context for one request made on the way out (cleanup,
// a release), whatever happened to the caller's.
func shortContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}
