package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes. Those from 64 up follow sysexits.h.
const (
	exitOK          = 0
	exitFailure     = 1   // any other failure (demo: a worker failed or a violation was seen)
	exitUsage       = 64  // EX_USAGE: bad command line
	exitUnavailable = 69  // EX_UNAVAILABLE: Redis could not be reached or answered with an error
	exitLockLost    = 70  // EX_SOFTWARE: run lost the lock while COMMAND ran, and stopped COMMAND
	exitTempFail    = 75  // EX_TEMPFAIL: run's --wait ended without the lock
	exitCannotExec  = 126 // COMMAND was found but could not be started
	exitNotFound    = 127 // COMMAND was not found
	exitSignalBase  = 128 // run: COMMAND (or relock, while it waited) ended by signal N exits 128+N
)

// command is one subcommand of relock.
type command struct {
	name    string
	summary string
	hidden  bool // not listed in the usage text (demo-worker)
	main    func(cl *cli, args []string) int
}

var commands = []command{
	{name: "run", summary: "run a command while holding a lock (a distributed flock)", main: (*cli).run},
	{name: "status", summary: "show who holds a lock, its lease, its fair queue and fencing counter", main: (*cli).status},
	{name: "unlock", summary: "delete a lock whoever holds it (needs --force)", main: (*cli).unlock},
	{name: "demo", summary: "watch worker processes contend for one lock, live", main: (*cli).demo},
	{name: "demo-worker", hidden: true, main: (*cli).demoWorker},
}

// cli holds what every subcommand writes to.
type cli struct {
	stdout io.Writer
	stderr io.Writer
}

func main() {
	cl := &cli{stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(cl.main(os.Args[1:]))
}

func (cl *cli) main(args []string) int {
	if len(args) == 0 {
		cl.usage(cl.stderr)
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				return c.main(cl, []string{"--help"})
			}
			fmt.Fprintf(cl.stderr, "relock: no command %q\n", args[1])
			return exitUsage
		}
		cl.usage(cl.stdout)
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(cl.stderr, "relock: no command %q\n\n", name)
		cl.usage(cl.stderr)
		return exitUsage
	}
	return c.main(cl, args[1:])
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func (cl *cli) usage(w io.Writer) {
	var b strings.Builder
	b.WriteString("relock: distributed locks on Redis (Redisson's layout), from the shell.\n\n")
	b.WriteString("Usage:\n  relock COMMAND [FLAGS] [ARGS]\n\nCommands:\n")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
		}
	}
	b.WriteString("\nRun 'relock COMMAND --help' for a command's flags.\n")
	b.WriteString("--redis defaults to $RELOCK_REDIS, then " + fallbackRedis + ".\n")
	b.WriteString("\nExit codes: 0 ok, 1 failure, 64 usage, 69 Redis unavailable, 70 lock lost (run),\n" +
		"75 --wait ended without the lock (run); run otherwise exits with COMMAND's code.\n")
	io.WriteString(w, b.String())
}

// warnf prints a message prefixed with "relock: " on stderr.
func (cl *cli) warnf(format string, args ...any) {
	fmt.Fprintf(cl.stderr, "relock: "+format+"\n", args...)
}

// errorf is warnf that returns code, for the last words of a command.
func (cl *cli) errorf(code int, format string, args ...any) int {
	cl.warnf(format, args...)
	return code
}
