// Command keyrate is keyrate's command-line tool. It has one subcommand per
// job:
//
//	keyrate replay [-store mutex|striped|atomic] < input
//
// decides a recorded stream of requests with one of the library's stores on
// a manual clock and prints allow or deny for each; "keyrate replay -h"
// describes its input.
//
//	keyrate report [-o DIR] RESULTS [AFTER]
//
// writes the benchmark comparison report from saved benchmark output, and
//
//	keyrate serve [-addr ADDR] [-policies FILE -tier-header NAME] ...
//
// runs an HTTP server that rate-limits by client, with tiers read from a
// policies file. Run "keyrate -h" for the full list, and "keyrate CMD -h"
// for a command's flags.
//
// Exit status: 0 on success, 1 when reading the input or writing the output
// fails, 2 for a usage error or bad input.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
)

// command is one subcommand: the function that runs it and the one-line
// summary that "keyrate -h" lists.
//
// run gets the arguments after the subcommand's name and returns the exit
// status. It must write only to the writers it is given and read only from
// stdin, so that tests can call it directly.
type command struct {
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
	summary string
}

// commands is the dispatch table, keyed by subcommand name.
//
// Each subcommand lives in its own file, which registers it from an init
// function there, so that adding one touches no other file:
//
//	func init() {
//		commands["serve"] = command{
//			run: func(args []string, _ io.Reader, stdout, stderr io.Writer) int {
//				return runServe(args, stdout, stderr)
//			},
//			summary: "serve rate-limit decisions over HTTP",
//		}
//	}
//
// The summary is a lower-case phrase with no final period.
var commands = map[string]command{}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run runs the keyrate command line args (without the program name) and
// returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return dispatch(commands, args, stdin, stdout, stderr)
}

// dispatch runs the subcommand of cmds that args name. With no arguments it
// prints the usage on stderr and returns 2; for -h, -help, --help or help it
// prints it on stdout and returns 0; an unknown name is a one-line error on
// stderr and status 2.
func dispatch(cmds map[string]command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr, cmds)
		return 2
	}
	switch name := args[0]; name {
	case "-h", "-help", "--help", "help":
		usage(stdout, cmds)
		return 0
	default:
		cmd, ok := cmds[name]
		if !ok {
			fmt.Fprintf(stderr, "keyrate: unknown command %q; run 'keyrate -h' for the list\n", name)
			return 2
		}
		return cmd.run(args[1:], stdin, stdout, stderr)
	}
}

// usage writes the top-level help, listing cmds sorted by name, to w.
func usage(w io.Writer, cmds map[string]command) {
	names := make([]string, 0, len(cmds))
	width := 0
	for name := range cmds {
		names = append(names, name)
		width = max(width, len(name))
	}
	slices.Sort(names)
	fmt.Fprint(w, "keyrate is the command-line tool of the keyrate per-key rate limiter.\n\n")
	fmt.Fprint(w, "Usage:\n\n\tkeyrate <command> [arguments]\n\nThe commands are:\n\n")
	for _, name := range names {
		fmt.Fprintf(w, "\t%-*s  %s\n", width, name, cmds[name].summary)
	}
	fmt.Fprint(w, "\nRun 'keyrate <command> -h' for a command's flags.\n")
}

// parseFlags parses args with fs, which must have been made with
// flag.ContinueOnError. For -h it writes help and fs's flags to stdout and
// returns flag.ErrHelp; any other error is returned for the caller to
// report on one line. fs's own output is discarded.
func parseFlags(fs *flag.FlagSet, args []string, help string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, help)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
	}
	return err
}
