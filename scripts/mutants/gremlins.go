package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// gremlinsModule and gremlinsVersion pin the mutation tool.
const (
	gremlinsModule  = "github.com/go-gremlins/gremlins"
	gremlinsVersion = "v0.6.0"
)

// gremlinsReport is the part of gremlins' -o report that is read here.
type gremlinsReport struct {
	Files []struct {
		FileName  string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
}

// installGremlins returns the path of gremlins at the pinned version,
// installing it (go install, into GOBIN or GOPATH/bin) when it is
// missing or another version is installed.
func installGremlins(ctx context.Context) (string, error) {
	bin, err := exec.Command("go", "env", "GOBIN").Output()
	if err != nil {
		return "", err
	}
	dir := strings.TrimSpace(string(bin))
	if dir == "" {
		gopath, err := exec.Command("go", "env", "GOPATH").Output()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(strings.SplitN(strings.TrimSpace(string(gopath)), string(os.PathListSeparator), 2)[0], "bin")
	}
	path := filepath.Join(dir, "gremlins")
	if out, err := exec.Command("go", "version", "-m", path).Output(); err == nil &&
		strings.Contains(string(out), "\tmod\t"+gremlinsModule+"\t"+gremlinsVersion+"\t") {
		return path, nil
	}
	fmt.Printf("gremlins: go install %s/cmd/gremlins@%s\n", gremlinsModule, gremlinsVersion)
	cmd := exec.CommandContext(ctx, "go", "install", gremlinsModule+"/cmd/gremlins@"+gremlinsVersion)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install gremlins: %w", err)
	}
	return path, nil
}

// runGremlins runs gremlins (one worker: the machine is shared) on each
// package in the copy tree (its tests under the race detector with race),
// and reports its figures. It returns what failed: a package whose efficacy
// (killed / (killed + lived)) is below threshold.
func runGremlins(ctx context.Context, tree, tmp string, pkgs []string, threshold float64, race bool) ([]string, error) {
	bin, err := installGremlins(ctx)
	if err != nil {
		return nil, err
	}
	var failed []string
	for _, spec := range pkgs {
		pkg, want := spec, threshold
		if p, t, ok := strings.Cut(spec, "="); ok {
			v, err := strconv.ParseFloat(t, 64)
			if err != nil {
				return nil, fmt.Errorf("-gremlins %q: bad threshold", spec)
			}
			pkg, want = p, v
		}
		start := time.Now()
		report := filepath.Join(tmp, "gremlins-"+strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+".json")
		// GOFLAGS reaches every go test gremlins runs: the coverage run
		// and each mutant's.
		goflags := "GOFLAGS=-trimpath"
		if race {
			goflags += " -race"
		}
		env := append(os.Environ(), "GOWORK=off", goflags, "TMPDIR="+tmp)
		// Build the package and its dependencies first: gremlins takes a
		// mutant to hang when its tests run three times as long as the
		// coverage run, which must not include building the standard
		// library.
		warm := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "^$", pkg)
		warm.Dir, warm.Env = tree, env
		if out, err := warm.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("building %s: %w\n%s", pkg, err, out)
		}
		cmd := exec.CommandContext(ctx, bin, "unleash", "--silent", "--workers", "1", "--timeout-coefficient", "3",
			"--output", report, pkg)
		cmd.Dir, cmd.Env = tree, env
		cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
		cmd.WaitDelay = 10 * time.Second
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("gremlins on %s: %w\n%s", pkg, err, out)
		}
		data, err := os.ReadFile(report)
		if err != nil {
			return nil, err
		}
		var r gremlinsReport
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, fmt.Errorf("gremlins report of %s: %w", pkg, err)
		}
		counts := map[string]int{}
		var lived []string
		for _, f := range r.Files {
			for _, m := range f.Mutations {
				counts[m.Status]++
				if m.Status == "LIVED" {
					lived = append(lived, fmt.Sprintf("%s/%s:%d:%d %s", strings.TrimPrefix(pkg, "./"), f.FileName, m.Line, m.Column, m.Type))
				}
			}
		}
		sort.Strings(lived)
		killed, live := counts["KILLED"], counts["LIVED"]
		efficacy := 100.0
		if killed+live > 0 {
			efficacy = 100 * float64(killed) / float64(killed+live)
		}
		fmt.Printf("gremlins %-18s efficacy %5.1f%% (at least %.0f%%): killed %d, lived %d, timed out %d, not covered %d, not viable %d (%v)\n",
			pkg, efficacy, want, killed, live, counts["TIMED OUT"], counts["NOT COVERED"], counts["NOT VIABLE"],
			time.Since(start).Round(time.Second))
		for _, l := range lived {
			fmt.Println("      lived", l)
		}
		if efficacy < want {
			failed = append(failed, fmt.Sprintf("gremlins efficacy of %s %.1f%% < %.1f%%", pkg, efficacy, want))
		}
	}
	return failed, nil
}
