package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"

	"github.com/nats-operator/nats-operator/internal/release"
)

func main() {
	version := flag.String("version", "", "The release's version, x.y.z or vx.y.z; required.")
	out := flag.String("out", "dist", "The directory the release is written to.")
	clean := flag.Bool("clean", false, "Remove -out first (once the version is known to be good).")
	plugins := flag.Bool("plugins", true, "Build kubectl-nats for linux and darwin, amd64 and arm64; false leaves them out.")
	arch := flag.String("arch", runtime.GOARCH, "The image's architecture.")
	flag.Parse()
	if err := run(*version, *out, *clean, *plugins, *arch); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(version, out string, clean, plugins bool, arch string) error {
	if version == "" {
		return fmt.Errorf("no version: make release VERSION=x.y.z")
	}
	if _, err := release.NormalizeVersion(version); err != nil {
		return err
	}
	if clean {
		if err := os.RemoveAll(out); err != nil {
			return err
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	r, err := release.Run(ctx, release.Options{Version: version, Out: out, Plugins: plugins, Arch: arch, Log: os.Stderr})
	if err != nil {
		return err
	}
	fmt.Printf("release %s (commit %s) in %s:\n", r.Version, r.Commit, out)
	for _, f := range r.Files {
		fi, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			return err
		}
		fmt.Printf("  %-32s %10d bytes\n", f, fi.Size())
	}
	fmt.Printf("image %s\n", r.Reference)
	return nil
}
