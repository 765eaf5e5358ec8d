package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/redis/rueidis"
)

// Exit codes. Those from 64 up follow sysexits.h.
const (
	exitOK          = 0
	exitFailure     = 1   // any other failure (demo: a worker failed or a violation was seen)
	exitCycle       = 3   // waits: a cycle of waiting owners (a deadlock) was found
	exitNoSuchLock  = 4   // status: nothing at all is under the name
	exitUsage       = 64  // EX_USAGE: bad command line
	exitUnavailable = 69  // EX_UNAVAILABLE: Redis could not be reached, refused the password, failed TLS, or answered with an error
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
	{name: "status", summary: "show who holds a lock and who waits, its lease, queue and fencing counter", main: (*cli).status},
	{name: "unlock", summary: "delete a lock whoever holds it (needs --force)", main: (*cli).unlock},
	{name: "scan", summary: "list every lock in Redis, its holders and TTL; flag leaked ones", main: (*cli).scan},
	{name: "waits", summary: "show who waits for what, every kind, and flag deadlocks (cycles)", main: (*cli).waits},
	{name: "top", summary: "a live view of the busiest locks: holders, waiters, acquisitions", main: (*cli).top},
	{name: "demo", summary: "watch worker processes contend for one lock, live", main: (*cli).demo},
	{name: "version", summary: "print relock's version and the Go version it was built with", main: (*cli).version},
	{name: "demo-worker", hidden: true, main: (*cli).demoWorker},
}

// cli holds what every subcommand writes to, and the connection flags.
type cli struct {
	stdout io.Writer
	stderr io.Writer
	// conn holds the connection flags given before the subcommand; the
	// subcommand's own flag set updates it with those given after.
	conn   *connFlags
	redact redactor
}

func main() {
	cl := &cli{stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(cl.main(os.Args[1:]))
}

const globalUsage = `Usage: relock [CONNECTION FLAGS] COMMAND [FLAGS] [ARGS]
       relock --version`

func (cl *cli) main(args []string) int {
	cl.conn = newConnFlags()
	fs := flag.NewFlagSet("relock", flag.ContinueOnError)
	fs.SetOutput(cl.stderr)
	fs.Usage = func() {}
	cl.conn.register(fs)
	showVersion := fs.Bool("version", false, "print the version")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			cl.usage(cl.stdout)
			return exitOK
		}
		fmt.Fprintf(cl.stderr, "%s\nRun 'relock --help' for more.\n", globalUsage)
		return exitUsage
	}
	if *showVersion {
		return cl.version(nil)
	}
	args = fs.Args()
	if len(args) == 0 {
		cl.usage(cl.stderr)
		return exitUsage
	}
	name := args[0]
	if name == "help" {
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				return c.main(cl, []string{"--help"})
			}
			return cl.errorf(exitUsage, "no command %q", args[1])
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
	b.WriteString(globalUsage + "\n\nCommands:\n")
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
		}
	}
	b.WriteString("\nRun 'relock COMMAND --help' for a command's flags.\n")
	b.WriteString(connectionHelp)
	b.WriteString("\nExit codes: 0 ok, 1 failure, 3 a deadlock found (waits), 4 no such lock\n" +
		"(status), 64 usage, 69 Redis unavailable (unreachable, wrong password, TLS\n" +
		"failure), 70 lock lost (run), 75 --wait ran out (run), 126/127 COMMAND\n" +
		"cannot run / not found, 128+N signal N; run otherwise exits with COMMAND's\n" +
		"code.\n")
	io.WriteString(w, b.String())
}

// connectionHelp describes the connection flags, in the usage text.
const connectionHelp = `
Connection flags (before or after the command's name):
  --redis ADDR|URL  host[:port] (port 6379 when left out; IPv6 in brackets),
                    a list a:6379,b:6379 of Redis Cluster seeds, or a URL:
                    redis://[USER[:PASSWORD]@]HOST[:PORT][/DB], rediss:// (TLS),
                    unix:///path/to/redis.sock, with ?addr=HOST:PORT (more
                    seeds) and ?master_set=NAME (Sentinel: the addresses are
                    the sentinels'). Default $RELOCK_REDIS, then 127.0.0.1:6379.
  --user NAME       ACL user; the password is the URL's, else $RELOCK_PASSWORD,
                    else $REDISCLI_AUTH (never on the command line).
  --tls, --cacert FILE, --cert FILE, --key FILE, --sni NAME, --insecure
                    TLS, as redis-cli names them.
  --prefix P        put P before every lock name, as rlock.WithKeyPrefix(P) or
                    Redisson's NameMapper that prepends P; scan shows names
                    without it. Default $RELOCK_PREFIX, else none.
`

// warnf prints a message prefixed with "relock: " on stderr, with every
// secret masked.
func (cl *cli) warnf(format string, args ...any) {
	io.WriteString(cl.stderr, cl.redact.mask(prefixed(fmt.Sprintf(format, args...)))+"\n")
}

// prefixed puts "relock: " before msg once: the library's errors carry
// it already.
func prefixed(msg string) string {
	return "relock: " + strings.TrimPrefix(msg, "relock: ")
}

// errorf is warnf that returns code, for the last words of a command.
func (cl *cli) errorf(code int, format string, args ...any) int {
	cl.warnf(format, args...)
	return code
}

// target resolves the connection flags; code is -1 when t is usable, else
// the exit code (the error was printed).
func (cl *cli) target() (t *target, code int) {
	t, err := cl.conn.resolve(os.Getenv, cl.redact.add)
	if err != nil {
		return nil, cl.errorf(exitUsage, "%v", err)
	}
	return t, -1
}

// connect resolves the connection flags and connects; code is -1 on
// success (the caller closes rdb), else the exit code (the error was
// printed).
func (cl *cli) connect() (rdb rueidis.Client, t *target, code int) {
	if t, code = cl.target(); code >= 0 {
		return nil, nil, code
	}
	rdb, err := t.dial()
	if err != nil {
		return nil, nil, cl.errorf(exitUnavailable, "%v", err)
	}
	return rdb, t, -1
}
