package main

import (
	"flag"
	"fmt"

	"github.com/nats-operator/nats-operator/internal/version"
)

// versionRequested reports whether the command line is only --version (or
// -version): the command then prints version.Get() and exits 0, before
// any flag is parsed.
func versionRequested(args []string) bool {
	return len(args) == 1 && (args[0] == "--version" || args[0] == "-version")
}

// printVersion prints the line --version prints: "v0.2.0 (commit 1a2b3c4d5e6f,
// go1.26.8 linux/amd64)".
func printVersion() {
	fmt.Println(version.Get().String())
}

// usage is -help's text: the subcommands and --version, then the flags.
func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprint(out, `Usage:
  nats-operator [flags]                  run the controller
  nats-operator backup|restore [flags]   run a backup or restore Job (-help after it lists its flags)
  nats-operator --version                print the version and exit
Flags:
`)
	flag.PrintDefaults()
}
