// Package backup takes JetStream snapshots of streams and restores them,
// through the JetStream API ($JS.API.STREAM.SNAPSHOT and
// $JS.API.STREAM.RESTORE), in the directory layout `nats stream backup`
// writes and `nats stream restore` reads: a directory per stream holding
// backup.json (the stream's configuration and state at the snapshot) and
// stream.tar.s2 (the snapshot the server streams, its messages and, unless
// left out, its consumers with their delivered and acknowledged state).
//
// The data passes through in chunks (the server's window, 8 MiB by
// default) and goes straight to the file: a backup never holds a stream in
// memory. Which account a stream is read from or restored into is the
// account of the connection's user. The package does no Kubernetes I/O; a
// backup Job or a test drives it.
package backup
