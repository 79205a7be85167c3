// Command metricsload is the /metrics load benchmark of issue 60 (check
// 5), run by hand with hack/bench-metrics.sh, not in CI: a flood of
// requests to the controller's /metrics, each with a new made-up bearer
// token, during a rolling restart, and what it does to leader election and
// to the rollout's steps.
//
// Since commit e8c161f the controller reviews /metrics tokens
// (TokenReview, then SubjectAccessReview; internal/apiauth) on a
// Kubernetes client of their own (20 requests a second, burst 40), at most
// 8 reviews in flight, a request that needs one more answered 429 at once:
// made-up tokens should not slow the client that leader election and every
// step share. This benchmark measures it.
//
// On the local stack of the e2e tests (framework.StartStack: test/testenv's
// etcd, kube-apiserver and kube-controller-manager; one test/localnode node
// that runs pods as nats-server processes; the controller as the
// cmd/nats-operator process, as the nats-system/nats-operator
// ServiceAccount, with leader election on the Lease nats-system/nats-operator
// and its default HTTPS /metrics, --metrics-secure) it creates the example
// JetStream cluster of manifests/examples/natscluster-jetstream.yaml (3
// servers, --from-version 2.15.2, production's lame duck timings) and an
// R3 file stream BENCH (no publisher: the servers have no clients, so a
// server in lame duck mode exits at once), waits until it is Settled and
// UpToDate, then runs three rollouts, each a change of spec.version, and
// waits until each is Ready, Settled and UpToDate again:
//
//   - baseline: --from-version -> --to-version (2.15.2 -> 2.15.1), no flood;
//   - back: --to-version -> --from-version, no flood (a second sample of
//     the quiet case, and the way back);
//   - flood: --from-version -> --to-version again, the version patched
//     right after the flood started.
//
// The flood: --rate requests a second (300) for --duration (60 s) to the
// controller's MetricsURL, HTTPS without verifying its self-signed
// certificate, each GET with "Authorization: Bearer <32 random bytes in
// hex>", sent on a fixed schedule (request i at start + i/rate, whatever
// the answers; at most 1024 outstanding, more counted as not sent) from
// one Go http.Client that keeps connections alive (an attacker that
// reconnects for each request would spend this machine's 2 cores on TLS
// handshakes instead). flood_* figures: requests sent and the rate that
// achieved, responses by HTTP status (401: the TokenReview said no; 429:
// every review slot taken; other), transport errors, and the latency of
// each status (p50, p99, max).
//
// Per rollout (prefix baseline_, back_, flood_rollout_):
//
//   - wall_seconds: from the patch of spec.version to the first sample
//     (every 200 ms) of the NatsCluster that is Progressing=False UpToDate
//     for its generation with status.version the new version;
//     settled_seconds: to the first that is also Ready AllServersReady and
//     Settled AllGroupsCurrent (framework.CheckSettledUpToDate).
//   - step<k>_deleted_after_change_seconds: when this benchmark's pod
//     informer saw the step's pod deletion start, from the patch.
//   - step<k>_gate_to_step_seconds: the controller's own
//     nats_operator_gate_to_step_seconds{kind="RestartOne"}
//     (pkg/controller/metrics.go: from the planning time of the last sync
//     that found the gate closed to the start of the step that followed,
//     an upper bound of how long the controller took to act once the gate
//     opened), one observation at a time, from the increase of the
//     histogram's _sum at each _count increment, as test/bench/rollout
//     reads it (the controller does not log it: its log has the "Waiting at
//     the gate" looks, at -v=4). /metrics is read every 500 ms with a
//     ServiceAccount token bound to the ClusterRole
//     nats-operator-metrics-reader, a new token per rollout whose review is
//     made before the patch and stays cached for its minute, so the flood
//     does not keep the benchmark from reading (its failed reads are
//     counted: metrics_reads_failed). Two observations between two reads
//     are printed as their mean and marked. An observation is matched to
//     the step whose pod deletion the informer saw between the two reads
//     (±250 ms); the first step of a rollout follows no wait at the gate
//     and is usually not observed. gate_to_step_{min,median,max}_seconds
//     over the rollout's observations.
//   - step_duration_{min,median,max}_seconds: the same for
//     nats_operator_step_duration_seconds{kind="RestartOne"} (the step's
//     writes).
//
// Leader election (lease_*): the Lease nats-system/nats-operator is read
// every 250 ms over the whole run. lease_transitions: the increase of
// spec.leaseTransitions (client-go's elector counts a change of holder),
// from before the baseline to after the flood, and within the flood; the
// holderIdentity at the start and at the end and every holder seen;
// lease_max_renew_interval_seconds: the longest time between two
// consecutive spec.renewTime values the leader wrote (it renews every
// --leader-elect-retry-period, 2 s, and gives up leading after
// --leader-elect-renew-deadline, 10 s, without one), per phase; and the
// controller log's "Started leading" and "Stopped leading" lines (a lost
// Lease ends the process, and this benchmark does not restart it).
//
// Then, from 15 s into the flood, every 5 s (--new-token-at,
// --new-token-every, --new-tokens 8), a new token of the scraper's
// ServiceAccount (a new TokenRequest, so not cached; its user's
// SubjectAccessReview is, so it needs one review) tries /metrics every 200
// ms until it answers 200 (new_token_during_flood_*: tries and time until
// 200, median and max): a scraper whose cached answer expires during a
// flood competes for a free review slot with the flood.
//
// Every figure is printed on a line of its own, "name: value unit";
// comment lines start with "#". Progress goes to stderr. The whole run
// takes about 3 minutes.
package main
