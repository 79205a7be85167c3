// Command localnode runs a local node (see package test/localnode) against
// the cluster of a kubeconfig until interrupted: it registers a Ready Node,
// binds pending pods to it and runs their nats-server containers as local
// processes on 127.0.0.x addresses.
//
//	go run ./test/localnode/cmd/localnode --kubeconfig /tmp/env/kubeconfig --root /tmp/localnode
package main
