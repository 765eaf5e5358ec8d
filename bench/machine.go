package main

import (
	"bufio"
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// machine is what the figures were measured on.
type machine struct {
	CPU        string   `json:"cpu"`
	Cores      int      `json:"cores"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	Go         string   `json:"go"`
	GOOS       string   `json:"goos"`
	GOARCH     string   `json:"goarch"`
	Kernel     string   `json:"kernel"`
	Redis      string   `json:"redis_server"`
	LoadAvg    string   `json:"load_average"`
	Modules    []string `json:"modules,omitempty"`
}

func describeMachine(ctx context.Context, srv *server) machine {
	m := machine{
		CPU:        cpuModel(),
		Cores:      runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0),
		Go:         runtime.Version(),
		GOOS:       runtime.GOOS,
		GOARCH:     runtime.GOARCH,
		Kernel:     "linux " + readTrimmed("/proc/sys/kernel/osrelease"),
		Redis:      srv.version(ctx),
		LoadAvg:    loadAverage(),
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/redis/rueidis", "github.com/go-redsync/redsync/v4",
				"github.com/redis/go-redis/v9", "github.com/bsm/redislock":
				m.Modules = append(m.Modules, d.Path+" "+d.Version)
			}
		}
	}
	return m
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// loadAverage is the 1, 5 and 15 minute load average: other work on the
// machine shows in the figures.
func loadAverage() string {
	f := strings.Fields(readTrimmed("/proc/loadavg"))
	return strings.Join(f[:min(3, len(f))], " ")
}
