// Command clientpause measures the pause a synchronous JetStream publisher
// sees when the server it is connected to goes through the pods' lame duck
// sequence, for several client settings; run by hand with
// hack/bench-clientpause.sh, not in CI. No Kubernetes: real nats-server
// processes (the binary hack/testbin.sh builds) on the configs pkg/render
// renders for a 3-server JetStream NatsCluster (production's lame duck
// timings: lame_duck_duration 30s, lame_duck_grace_period 10s), localized
// for loopback by rendertest.LocalizeConfig, and an R3 file stream BENCH.
//
// Each try waits until the cluster is current (meta group and stream led,
// every member current), connects one publisher to the stream leader's
// server S only (as a client of the cluster's Service lands on one server;
// it discovers the others from the INFO), publishes --warmup, then runs the
// pod's preStop hook on S (`nats-server --signal ldm=<pid_file>`, render's
// statefulset.go), waits for S to exit (at most the pods'
// terminationGracePeriodSeconds, as the kubelet would), starts S again on
// the same store (the pod's restart) and keeps publishing until the first
// ack after the exit and a second more. The publisher sends one 128 B
// message at a time on its own subject, the next after the ack of the one
// before; each variant sets it up differently (variants in publisher.go):
//
//   - defaults: nats.go's defaults (jetstream.Publish, its 5 s timeout); a
//     message that failed is dropped and the next one published.
//   - ldm_reconnect: defaults plus nats.LameDuckModeHandler calling
//     nc.ForceReconnect(): the client leaves S when S announces lame duck
//     mode, before S closes it. nats.go then fails the publish in flight
//     at once (nats.ErrDisconnected) instead of waiting out its timeout.
//   - ldm_newconn: defaults plus a nats.LameDuckModeHandler that connects
//     a second client to the servers S announced, switches the publisher
//     to it and closes the first after its last ack: no publish is ever in
//     flight on a connection that closes.
//   - retry_msgid: a per-publish timeout (--retry-timeout, 500ms) and every
//     message published with a Nats-Msg-Id (jetstream.WithMsgID), retried
//     with the same id until acknowledged, so the stream's duplicate window
//     drops a retry of a message whose ack was lost.
//   - ldm_reconnect_retry_msgid: both.
//
// Then natscli's `nats bench js pub sync` (its defaults, one client on S,
// on the existing stream BENCH, --msgs for about --nats-seconds at the rate
// the first defaults try measured) with the same lame duck signal 2 s after
// its start, --nats-tries times. Last, a second cluster with
// spec.lameDuck.gracePeriod --short-grace (1s) runs
// --short-grace-variants (defaults).
//
// Figures, per try (prefix <variant>_try<k>_, grace<d>_ on the second
// cluster): max_gap_seconds, the longest time between two consecutive acks,
// and max_gap_start_after_signal_seconds, when it began; errors, failed
// publishes; lame_duck_info_after_signal_seconds, when the client's
// LameDuckModeHandler ran (the INFO with ldm=true); messages_acked; and
// stored_not_acked, messages the stream holds on the try's subject beyond
// those acknowledged (a publish whose ack was lost: a retry without a
// Nats-Msg-Id would store it twice). Comment lines give the server's lame
// duck steps from its log (entering lame duck mode, JetStream shut down,
// closing clients, exiting, relative to the signal), the client's
// disconnections and reconnections, the gaps of 100ms or more and the
// errors. Per variant, the longest gap and the errors over its tries; per
// natscli run, whether it completed and its output.
package main
