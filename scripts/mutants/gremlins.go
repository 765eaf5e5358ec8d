package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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
// package in the copy tree, with the tests under the race detector, and
// reports its figures. It returns what failed: a package whose efficacy
// (killed / (killed + lived)) is below threshold.
func runGremlins(ctx context.Context, tree, tmp string, pkgs []string, threshold float64) ([]string, error) {
	bin, err := installGremlins(ctx)
	if err != nil {
		return nil, err
	}
	var failed []string
	for _, pkg := range pkgs {
		start := time.Now()
		report := filepath.Join(tmp, "gremlins-"+strings.NewReplacer("/", "_", ".", "_").Replace(pkg)+".json")
		cmd := exec.CommandContext(ctx, bin, "unleash", "--silent", "--workers", "1", "--output", report, pkg)
		cmd.Dir = tree
		// GOFLAGS reaches every go test gremlins runs: the coverage run
		// and each mutant's.
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-race", "TMPDIR="+tmp)
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
					lived = append(lived, fmt.Sprintf("%s:%d:%d %s", f.FileName, m.Line, m.Column, m.Type))
				}
			}
		}
		sort.Strings(lived)
		killed, live := counts["KILLED"], counts["LIVED"]
		efficacy := 100.0
		if killed+live > 0 {
			efficacy = 100 * float64(killed) / float64(killed+live)
		}
		fmt.Printf("gremlins %-18s efficacy %5.1f%%: killed %d, lived %d, timed out %d, not covered %d, not viable %d (%v)\n",
			pkg, efficacy, killed, live, counts["TIMED OUT"], counts["NOT COVERED"], counts["NOT VIABLE"],
			time.Since(start).Round(time.Second))
		for _, l := range lived {
			fmt.Println("      lived", l)
		}
		if efficacy < threshold {
			failed = append(failed, fmt.Sprintf("gremlins efficacy of %s %.1f%% < %.1f%%", pkg, efficacy, threshold))
		}
	}
	return failed, nil
}
