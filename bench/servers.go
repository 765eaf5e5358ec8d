package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/rueidis"
)

// server is a redis-server process this program started, on a free
// loopback port, without persistence. admin is a client of its own for
// INFO, CLIENT LIST, PUBSUB and FLUSHALL, so that the counters of the
// clients under test are not disturbed.
type server struct {
	Addr  string
	cmd   *exec.Cmd
	admin rueidis.Client
}

// startServer starts redis-server and waits until it answers PING. A port
// taken by someone else between the probe and the start is retried.
func startServer() (*server, error) {
	var lastErr error
	for range 3 {
		s, err := tryStartServer()
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func tryStartServer() (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	var out bytes.Buffer
	cmd := exec.Command("redis-server",
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = &out, &out
	// The server dies with this program even when it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s := &server{Addr: addr, cmd: cmd}
	deadline := time.Now().Add(5 * time.Second)
	for !ping(addr) {
		select {
		case <-exited:
			return nil, fmt.Errorf("redis-server on %s exited: %s", addr, strings.TrimSpace(out.String()))
		default:
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within 5s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.admin, err = rueidis.NewClient(rueidis.ClientOption{
		InitAddress: []string{addr}, DisableCache: true, ClientName: "bench-admin",
	})
	if err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping reports whether addr answers PING with PONG.
func ping(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// stop kills the server and waits for it.
func (s *server) stop() {
	if s.admin != nil {
		s.admin.Close()
	}
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		// Wait runs in the goroutine started with the process; give it a
		// moment so that the port is free before the program goes on.
		for range 50 {
			if err := s.cmd.Process.Signal(syscall.Signal(0)); err != nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// do runs one admin command.
func (s *server) do(ctx context.Context, args ...string) rueidis.RedisResult {
	return s.admin.Do(ctx, s.admin.B().Arbitrary(args...).Build())
}

// flush empties the server and resets its statistics.
func (s *server) flush(ctx context.Context) error {
	if err := s.do(ctx, "FLUSHALL").Error(); err != nil {
		return err
	}
	return s.do(ctx, "CONFIG", "RESETSTAT").Error()
}

// info returns the fields of the INFO sections as a map.
func (s *server) info(ctx context.Context, sections ...string) (map[string]string, error) {
	text, err := s.do(ctx, append([]string{"INFO"}, sections...)...).ToString()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string)
	for line := range strings.Lines(text) {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok {
			m[k] = v
		}
	}
	return m, nil
}

// stats is a snapshot of the server counters the runs report, read with
// one INFO call.
type stats struct {
	Commands int64            // total_commands_processed (inside scripts too)
	Calls    map[string]int64 // per command (cmdstat_<name>), e.g. "evalsha"
	CPU      time.Duration    // used_cpu_user + used_cpu_sys of the server
}

func (s *server) stats(ctx context.Context) (stats, error) {
	st := stats{Calls: make(map[string]int64)}
	m, err := s.info(ctx, "stats", "commandstats", "cpu")
	if err != nil {
		return st, err
	}
	st.Commands, _ = strconv.ParseInt(m["total_commands_processed"], 10, 64)
	for k, v := range m {
		name, ok := strings.CutPrefix(k, "cmdstat_")
		if !ok {
			continue
		}
		// calls=N,usec=...,usec_per_call=...,rejected_calls=0,failed_calls=0
		first, _, _ := strings.Cut(v, ",")
		if n, ok := strings.CutPrefix(first, "calls="); ok {
			st.Calls[name], _ = strconv.ParseInt(n, 10, 64)
		}
	}
	user, _ := strconv.ParseFloat(m["used_cpu_user"], 64)
	sys, _ := strconv.ParseFloat(m["used_cpu_sys"], 64)
	st.CPU = time.Duration((user + sys) * float64(time.Second))
	return st, nil
}

// sub returns the counters of st minus those of base.
func (st stats) sub(base stats) stats {
	d := stats{Commands: st.Commands - base.Commands, Calls: make(map[string]int64), CPU: st.CPU - base.CPU}
	for k, v := range st.Calls {
		if n := v - base.Calls[k]; n != 0 {
			d.Calls[k] = n
		}
	}
	return d
}

// add adds the counters of o to st.
func (st *stats) add(o stats) {
	st.Commands += o.Commands
	st.CPU += o.CPU
	if st.Calls == nil {
		st.Calls = make(map[string]int64)
	}
	for k, v := range o.Calls {
		st.Calls[k] += v
	}
}

// adminCommands are what this program's own admin client runs while a
// measurement is under way: not the implementation's work.
var adminCommands = []string{"info"}

// work is the number of calls of the implementation under test: every
// command the server ran, inside scripts too, but the admin's.
func (st stats) work() int64 {
	var n int64
	for k, v := range st.Calls {
		if !slices.Contains(adminCommands, k) {
			n += v
		}
	}
	return n
}

// workCalls is st.Calls without the admin's commands.
func (st stats) workCalls() map[string]int64 {
	m := make(map[string]int64, len(st.Calls))
	for k, v := range st.Calls {
		if !slices.Contains(adminCommands, k) {
			m[k] = v
		}
	}
	return m
}

// version is the server's redis_version.
func (s *server) version(ctx context.Context) string {
	m, err := s.info(ctx, "server")
	if err != nil {
		return "unknown"
	}
	return m["redis_version"]
}

// clientConns returns the connections named name in CLIENT LIST, and how
// many of them hold subscriptions.
func (s *server) clientConns(ctx context.Context, name string) (conns, subscribed int, err error) {
	text, err := s.do(ctx, "CLIENT", "LIST").ToString()
	if err != nil {
		return 0, 0, err
	}
	for line := range strings.Lines(text) {
		fields := make(map[string]string)
		for f := range strings.FieldsSeq(line) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		if fields["name"] != name {
			continue
		}
		conns++
		if fields["sub"] != "0" || fields["psub"] != "0" {
			subscribed++
		}
	}
	return conns, subscribed, nil
}

// channels returns the number of pub/sub channels matching pattern.
func (s *server) channels(ctx context.Context, pattern string) (int, error) {
	vs, err := s.do(ctx, "PUBSUB", "CHANNELS", pattern).AsStrSlice()
	return len(vs), err
}

// numsub returns the number of subscribers (connections) of channel.
func (s *server) numsub(ctx context.Context, channel string) (int64, error) {
	m, err := s.do(ctx, "PUBSUB", "NUMSUB", channel).AsMap()
	if err != nil {
		// RESP2 answers a flat array; rueidis speaks RESP3 here, but be
		// lenient.
		vs, err2 := s.do(ctx, "PUBSUB", "NUMSUB", channel).ToArray()
		if err2 != nil || len(vs) != 2 {
			return 0, err
		}
		return vs[1].AsInt64()
	}
	v, ok := m[channel]
	if !ok {
		return 0, nil
	}
	return v.AsInt64()
}
