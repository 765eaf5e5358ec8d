package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

const versionUsage = `Usage: relock version

Print relock's module version ("(devel)" for a build from a source tree
without one), its module path, and the Go version and platform it was
built with. 'relock --version' does the same.`

func (cl *cli) version(args []string) int {
	fs := newFlagSet("version", versionUsage)
	pos, _, code := cl.parse(fs, args, -1)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return cl.usageError(fs, "version takes no arguments")
	}
	fmt.Fprintln(cl.stdout, versionLine())
	return exitOK
}

// versionLine is "relock VERSION (MODULE) GOVERSION GOOS/GOARCH".
func versionLine() string {
	version, module, goVersion := "(devel)", "github.com/relock-go/relock", runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		if bi.Main.Path != "" {
			module = bi.Main.Path
		}
		if bi.GoVersion != "" {
			goVersion = bi.GoVersion
		}
	}
	return fmt.Sprintf("relock %s (%s) %s %s/%s", version, module, goVersion, runtime.GOOS, runtime.GOARCH)
}
