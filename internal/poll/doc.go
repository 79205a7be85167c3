// Package poll waits for a condition with a deadline: the one polling
// helper of the end-to-end tests (test/framework, test/e2e) and of the local
// node's tests (test/localnode).
//
// A condition is a func() error: nil when it holds, otherwise an error that
// says what is not there yet, so a test that times out reports the last
// reason rather than only that it waited. Unit tests do not poll (they
// drive the code under test step by step); this package is for tests
// against real processes.
package poll
