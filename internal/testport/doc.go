// Package testport hands out loopback ports for servers started by tests.
//
// A port taken from the kernel with a listen on port 0 comes from the
// ephemeral range, the same range outgoing connections take their source
// ports from; between the probe's close and the server's listen a route or
// client connection of a server already running can take it, and the server
// then fails to start ("address already in use"). The ports handed out here
// lie below Linux's ephemeral range, so only another listener can take them,
// and a port is never handed out twice by one test binary.
package testport
