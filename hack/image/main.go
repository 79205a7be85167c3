package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"

	"github.com/nats-operator/nats-operator/internal/image"
	"github.com/nats-operator/nats-operator/internal/release"
)

func main() {
	binary := flag.String("binary", "", "The controller's binary, static for linux; empty: build ./cmd/nats-operator next to -out.")
	out := flag.String("out", filepath.Join("_output", "nats-operator-image.tar"), "The OCI image archive to write.")
	version := flag.String("version", "dev", "The version: the image's tag and label, and the binary's version (x.y.z or vx.y.z, or dev).")
	commit := flag.String("commit", "", "The commit the binary and the label name; empty: git's HEAD, -dirty for a modified tree.")
	arch := flag.String("arch", runtime.GOARCH, "The image's architecture.")
	inspect := flag.String("inspect", "", "Print the digest, manifest and config of this OCI image archive, and do nothing else.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	if *inspect != "" {
		err = inspectArchive(*inspect)
	} else {
		err = build(ctx, *binary, *out, *version, *commit, *arch)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func build(ctx context.Context, binary, out, version, commit, arch string) error {
	if version != "dev" {
		v, err := release.NormalizeVersion(version)
		if err != nil {
			return err
		}
		version = v
	}
	if commit == "" {
		commit = release.GitCommit(ctx, ".")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	if binary == "" {
		binary = filepath.Join(filepath.Dir(out), "nats-operator")
		if err := release.Build(ctx, ".", "./cmd/nats-operator", binary, "linux", arch, version, commit); err != nil {
			return err
		}
		fmt.Printf("binary  %s (linux/%s, %s, commit %s)\n", binary, arch, version, commit)
	}
	img, err := image.Build(image.Options{Binary: binary, Version: version, Revision: commit, Arch: arch})
	if err != nil {
		return err
	}
	digest, err := image.WriteArchive(out, img, version)
	if err != nil {
		return err
	}
	fmt.Printf("archive %s\ndigest  %s\nimage   %s\n", out, digest, image.Reference(version, digest))
	return nil
}

func inspectArchive(file string) error {
	dir, err := os.MkdirTemp("", "nats-operator-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	img, err := image.Read(file, dir)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	manifest, err := img.Manifest()
	if err != nil {
		return err
	}
	config, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fmt.Printf("digest %s\n", digest)
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	fmt.Println("manifest:")
	if err := enc.Encode(manifest); err != nil {
		return err
	}
	fmt.Println("config:")
	return enc.Encode(config)
}
