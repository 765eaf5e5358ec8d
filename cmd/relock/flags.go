package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// flagSet is a subcommand's flags and the help text shown above them.
type flagSet struct {
	*flag.FlagSet
	usage   string
	conn    bool              // the connection flags are registered
	aliases map[string]string // long name -> short name
}

// newFlagSet returns the flags of subcommand name.
func newFlagSet(name, usage string) *flagSet {
	fs := &flagSet{FlagSet: flag.NewFlagSet("relock "+name, flag.ContinueOnError), usage: usage}
	fs.Usage = func() {} // printed by parse, to stdout for --help
	return fs
}

// newConnFlagSet returns the flags of subcommand name, with the connection
// flags of cl, so that those may also follow the subcommand's name.
func (cl *cli) newConnFlagSet(name, usage string) *flagSet {
	fs := newFlagSet(name, usage)
	cl.conn.register(fs.FlagSet)
	fs.conn = true
	return fs
}

// alias makes -short another name of the flag --long.
func (fs *flagSet) alias(short, long string) {
	f := fs.Lookup(long)
	fs.Var(f.Value, short, "")
	if fs.aliases == nil {
		fs.aliases = map[string]string{}
	}
	fs.aliases[long] = short
}

// printSynopsis writes the usage line and where to find more, after a
// mistake on the command line.
func (fs *flagSet) printSynopsis(w io.Writer) {
	line, _, _ := strings.Cut(fs.usage, "\n")
	fmt.Fprintf(w, "%s\nRun '%s --help' for more.\n", line, fs.Name())
}

// printUsage writes the help text and the flags, GNU style (--name VALUE),
// the subcommand's own first, then the connection flags.
func (fs *flagSet) printUsage(w io.Writer) {
	var b strings.Builder
	b.WriteString(strings.TrimRight(fs.usage, "\n"))
	var own, conn []*flag.Flag
	short := map[string]bool{}
	for _, s := range fs.aliases {
		short[s] = true
	}
	fs.VisitAll(func(f *flag.Flag) {
		switch {
		case short[f.Name]:
		case fs.conn && slices.Contains(connFlagNames, f.Name):
			conn = append(conn, f)
		default:
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		b.WriteString("\n\nFlags:\n")
		for _, f := range own {
			writeFlag(&b, f, fs.aliases[f.Name], true)
		}
	}
	// The connection flags in the order of connFlagNames, --redis first.
	slices.SortFunc(conn, func(a, b *flag.Flag) int {
		return slices.Index(connFlagNames, a.Name) - slices.Index(connFlagNames, b.Name)
	})
	if len(conn) > 0 {
		b.WriteString("\nConnection flags (also accepted before the command's name):\n")
		for _, f := range conn {
			// No default shown: it may come from the environment, and
			// the texts say where.
			writeFlag(&b, f, "", false)
		}
	}
	io.WriteString(w, b.String())
}

// writeFlag writes one flag's line(s) of the help text.
func writeFlag(b *strings.Builder, f *flag.Flag, short string, showDefault bool) {
	arg, text := flag.UnquoteUsage(f)
	head := "  --" + f.Name
	if short != "" {
		head = "  -" + short + ", --" + f.Name
	}
	if arg != "" {
		head += " " + strings.ToUpper(arg)
	}
	b.WriteString(head)
	if len(head) < 22 {
		b.WriteString(strings.Repeat(" ", 22-len(head)))
	} else {
		b.WriteString("\n" + strings.Repeat(" ", 22))
	}
	if d := f.DefValue; showDefault && d != "" && d != "false" && d != "0" && !strings.Contains(text, "default") {
		text += fmt.Sprintf(" (default %s)", d)
	}
	b.WriteString(wrap(text, 22, 79))
	b.WriteString("\n")
}

// wrap breaks text into lines of at most width columns, every line after
// the first indented by indent spaces (the first starts at column indent).
func wrap(text string, indent, width int) string {
	var b strings.Builder
	col := indent
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if col+1+len(word) > width {
				b.WriteString("\n" + strings.Repeat(" ", indent))
				col = indent
			} else {
				b.WriteString(" ")
				col++
			}
		}
		b.WriteString(word)
		col += len(word)
	}
	return b.String()
}

// parse parses args, which may mix flags and positional arguments until a
// "--". With max >= 0 it stops after max positional arguments (and the
// flags and "--" right after them) and returns what follows as rest; with
// max < 0 every argument that is not a flag is positional. code is -1 when
// the command should go on, else the exit code (help was shown, or the
// command line was wrong and the usage went to stderr).
func (cl *cli) parse(fs *flagSet, args []string, max int) (pos, rest []string, code int) {
	fs.SetOutput(cl.stderr)
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.printUsage(cl.stdout)
				return nil, nil, exitOK
			}
			// flag has printed the error.
			fs.printSynopsis(cl.stderr)
			return nil, nil, exitUsage
		}
		consumed := len(args) - fs.NArg()
		ended := consumed > 0 && args[consumed-1] == "--"
		args = fs.Args()
		if ended || len(args) == 0 || (max >= 0 && len(pos) == max) {
			if max < 0 {
				return append(pos, args...), nil, -1
			}
			n := min(max-len(pos), len(args))
			return append(pos, args[:n]...), args[n:], -1
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// usageError prints msg and the command's usage on stderr and returns
// exitUsage.
func (cl *cli) usageError(fs *flagSet, format string, args ...any) int {
	cl.warnf(format, args...)
	fs.printSynopsis(cl.stderr)
	return exitUsage
}

// parseDuration parses a non-negative Go duration or a number of seconds.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || math.IsNaN(f) || math.IsInf(f, 0) || f*float64(time.Second) > math.MaxInt64 {
			return 0, fmt.Errorf("%q is not a duration (examples: 5, 1.5s, 200ms, 2m)", s)
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 {
		return 0, fmt.Errorf("%q is negative", s)
	}
	return d, nil
}

// durationFlag is the one duration flag type of the commands: it takes Go
// durations ("1.5s", "200ms") or plain seconds ("5", "0.5"), never a
// negative one, and knows whether it was given.
type durationFlag struct {
	d   time.Duration
	set bool
}

// String is the flag's value; empty for a flag with no default that was
// not given.
func (f *durationFlag) String() string {
	if f == nil || (!f.set && f.d == 0) {
		return ""
	}
	return f.d.String()
}

// Set parses s.
func (f *durationFlag) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	f.d, f.set = d, true
	return nil
}

// duration adds a duration flag with a default value.
func (fs *flagSet) duration(name string, value time.Duration, usage string) *durationFlag {
	f := &durationFlag{d: value}
	fs.Var(f, name, usage)
	return f
}
