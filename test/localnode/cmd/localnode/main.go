package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/nats-operator/nats-operator/test/localnode"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	root := flag.String("root", "", "directory for pods, claims and logs (default: a new temporary directory)")
	nodeName := flag.String("node-name", "localnode", "name of the Node object")
	flag.Parse()
	if err := run(*kubeconfig, *root, *nodeName); err != nil {
		fmt.Fprintln(os.Stderr, "localnode:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, root, nodeName string) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if root == "" {
		if root, err = os.MkdirTemp("", "localnode-"); err != nil {
			return err
		}
	}
	node, err := localnode.New(cfg, localnode.Options{Root: root, NodeName: nodeName})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "localnode: node %s, root %s (logs in %s/logs)\n", nodeName, root, root)
	return node.Run(ctx)
}
