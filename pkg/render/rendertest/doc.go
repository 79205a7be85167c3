// Package rendertest holds test fixtures around pkg/render for any package's
// tests: NatsCluster builders with functional options, NATS trust fixtures
// (operator, system account, accounts, user creds) made with nats-io/jwt, and
// helpers that run rendered configs as real in-process nats-servers on
// loopback.
//
// Never import it from non-test code.
package rendertest
