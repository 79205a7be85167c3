// Command nats-trust-demo makes a throw-away NATS trust chain for trying
// out a NatsCluster with auth, and prints the Kubernetes objects that carry
// it:
//
//   - a NATS operator with a signing key, naming its system account;
//   - the system account, and a user of it whose creds file the controller
//     uses for $SYS actions;
//   - an application account "app" (JetStream enabled), and a user of it.
//
// It prints (or, with --out-dir, writes one file each) a NatsOperatorTrust
// <name>, a NatsAccountTrust <name>-app, and the Secrets
// <name>-system-creds and <name>-app-creds holding the two users' creds
// files at key user.creds. A NatsCluster uses them as:
//
//	auth:
//	  trustRef: {name: <name>}
//	  systemCredentials: {secretKeyRef: {name: <name>-system-creds}}
//	  accountTrustRefs: [{name: <name>-app}]
//
// The users' seeds exist only inside the creds files in the Secrets. The
// seeds of the NATS operator, its signing key and the accounts are thrown
// away: nothing more can be signed into this trust chain, so run the command
// again for a new one. It is for demonstrations and tests, not production
// (use nsc there).
//
//	go run ./cmd/nats-trust-demo --name demo --namespace nats > trust.yaml
package main
