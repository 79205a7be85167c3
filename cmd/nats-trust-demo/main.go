package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	name := flag.String("name", "demo", "prefix of the object names: NatsOperatorTrust <name>, NatsAccountTrust <name>-app, Secrets <name>-system-creds and <name>-app-creds")
	namespace := flag.String("namespace", "", "namespace of the objects; empty leaves it unset (for kubectl apply -n)")
	outDir := flag.String("out-dir", "", "write one file per object into this directory instead of printing them")
	flag.Parse()
	if err := run(*name, *namespace, *outDir); err != nil {
		fmt.Fprintln(os.Stderr, "nats-trust-demo:", err)
		os.Exit(1)
	}
}

func run(name, namespace, outDir string) error {
	chain, err := NewChain(name)
	if err != nil {
		return err
	}
	ms := Manifests(chain, name, namespace)
	if outDir == "" {
		out, err := JoinYAML(ms)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(out)
		return err
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	for _, m := range ms {
		y, err := MarshalYAML(m.Object)
		if err != nil {
			return fmt.Errorf("%s: %w", m.File, err)
		}
		// Secrets hold seeds: readable by the owner only.
		if err := os.WriteFile(filepath.Join(outDir, m.File), y, 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "wrote %d files to %s\n", len(ms), outDir)
	return nil
}
