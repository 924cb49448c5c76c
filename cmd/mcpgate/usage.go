package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/mcpgate/mcpgate/gateway"
)

// commands are the subcommands with the one-line summary their --help shows.
var commands = []struct{ name, summary string }{
	{"serve", "serve Streamable HTTP at /mcp (default: the built-in demo)"},
	{"stdio", "serve over stdin/stdout, for Claude Desktop-style clients"},
	{"tools", "print the tool catalog and exit"},
	{"build", "write a snapshot of the catalog, for serve --snapshot"},
	{"audit", "hints with provenance, lint findings, lockfile drift"},
	{"call", "send one request to an MCP server and print its answer as JSON"},
	{"version", "print the version of mcpgate and of Go it was built with"},
}

func summary(cmd string) string {
	for _, c := range commands {
		if c.name == cmd {
			return c.summary
		}
	}
	return ""
}

// usageError is bad usage of a command: an unknown flag, a flag without its
// value, a value out of its set, a stray argument. It is reported as one line
// that ends by pointing at the command's --help, with exit status 2.
type usageError struct {
	cmd string // "mcpgate serve", or "mcpgate" for the command itself
	msg string
}

func (e *usageError) Error() string {
	return fmt.Sprintf("%s: %s; see %s --help", e.cmd, e.msg, e.cmd)
}

// usagef returns a usageError for the flag set's command.
func usagef(fs *flag.FlagSet, format string, args ...any) error {
	return &usageError{cmd: fs.Name(), msg: fmt.Sprintf(format, args...)}
}

// helpRequested is returned by parse for -h/--help: the caller prints fs's
// help to stdout and exits 0.
type helpRequested struct{ fs *flag.FlagSet }

func (helpRequested) Error() string { return "help requested" }

// parse parses args into fs. The flag package's own output (its error and a
// dump of every flag, to stderr) is discarded: its error is rewritten into
// one line (see flagProblem), and --help is printed by the caller, to stdout.
func parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{fs}
		}
		return &usageError{cmd: fs.Name(), msg: flagProblem(err)}
	}
	if fs.NArg() > 0 {
		return usagef(fs, "unexpected argument %q", fs.Arg(0))
	}
	return nil
}

var (
	flagUndefined = regexp.MustCompile(`^flag provided but not defined: -+(.*)$`)
	flagNoValue   = regexp.MustCompile(`^flag needs an argument: -+(.*)$`)
	flagBadBool   = regexp.MustCompile(`^invalid boolean value (".*") for -+([^:]*): parse error$`)
	flagBadValue  = regexp.MustCompile(`^invalid value (".*") for flag -+([^:]*): (.*)$`)
)

// flagProblem rewrites an error of (*flag.FlagSet).Parse in the CLI's words,
// with flags spelled --name as the README spells them. The flag package only
// returns its errors as text, so this matches its wording (stable since Go
// 1.0); anything else passes through unchanged.
func flagProblem(err error) string {
	msg := err.Error()
	if m := flagUndefined.FindStringSubmatch(msg); m != nil {
		return "unknown flag --" + m[1]
	}
	if m := flagNoValue.FindStringSubmatch(msg); m != nil {
		return "--" + m[1] + " needs a value"
	}
	if m := flagBadBool.FindStringSubmatch(msg); m != nil {
		return "--" + m[2] + ": " + m[1] + " is not true or false"
	}
	if m := flagBadValue.FindStringSubmatch(msg); m != nil {
		return "--" + m[2] + ": " + m[3] // our Values name the value themselves
	}
	return msg
}

// printHelp writes a command's help: what it does and its flags, spelled
// --name.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	cmd := strings.TrimPrefix(fs.Name(), "mcpgate ")
	fmt.Fprintf(w, "Usage: %s [flags]\n\n%s.\n\nFlags:\n", fs.Name(), capitalize(summary(cmd)))
	fs.VisitAll(func(f *flag.Flag) {
		name, usage := flag.UnquoteUsage(f)
		line := "  --" + f.Name
		if name != "" {
			line += " " + name
		}
		fmt.Fprintf(w, "%s\n      %s", line, usage)
		if f.DefValue != "" && f.DefValue != "false" && !strings.Contains(usage, "default") {
			fmt.Fprintf(w, " (default %s)", f.DefValue)
		}
		fmt.Fprintln(w)
	})
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// mainUsage is what `mcpgate --help` prints.
func mainUsage(w io.Writer) {
	fmt.Fprint(w, "mcpgate — serve a REST API's OpenAPI operations as MCP tools\n\nUsage:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  mcpgate %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'mcpgate <command> --help' for the flags of a command.\n")
}

// version prints mcpgate's version (gateway.Version, the one the server
// reports in initialize), the Go version and platform.
func version(w io.Writer, args []string) error {
	fs := flag.NewFlagSet("mcpgate version", flag.ContinueOnError)
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(w, versionString())
	return nil
}

func versionString() string {
	goVersion := runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok && bi.GoVersion != "" {
		goVersion = bi.GoVersion
	}
	return fmt.Sprintf("mcpgate %s %s %s/%s", gateway.Version, goVersion, runtime.GOOS, runtime.GOARCH)
}

// choice is a flag whose value must be one of a fixed set, checked when the
// flag is parsed, so a bad value is a usage error like an unknown flag.
type choice struct {
	value   string
	allowed []string
}

func (c *choice) String() string {
	if c == nil {
		return ""
	}
	return c.value
}

func (c *choice) Set(v string) error {
	for _, a := range c.allowed {
		if v == a {
			c.value = v
			return nil
		}
	}
	return fmt.Errorf("%q is not %s", v, orList(c.allowed))
}

// orList renders ["a" "b" "c"] as "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
