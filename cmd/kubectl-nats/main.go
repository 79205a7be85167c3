package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nats-operator/nats-operator/pkg/kubectlnats"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlnats.Run(ctx, os.Args[1:], kubectlnats.StdIO())
	stop()
	os.Exit(code)
}
