// Command rollout is the rollout benchmark of issue 37 (item 4), run by hand
// with hack/bench-rollout.sh, not in CI. It measures what the controller
// adds to a rolling version change beyond the restarts themselves.
//
// On the local stack of the e2e tests (framework.StartStack: test/testenv's
// etcd, kube-apiserver and kube-controller-manager; one test/localnode node
// that runs pods as nats-server processes; the controller as the
// cmd/nats-operator process, as the nats-system/nats-operator
// ServiceAccount, with --metrics-secure=false so that its /metrics is read
// over plain HTTP without a TokenReview per scrape) it creates, for each of
// --servers (default 3,5), the example JetStream cluster of
// manifests/examples/natscluster-jetstream.yaml with that many replicas on
// --from-version (2.15.2), with production's lame duck timings (30s, grace
// period 10s; --lame-duck-grace changes the grace period), and an R3 file
// stream BENCH. framework's Stack and helpers take a testing.TB: the
// benchmark hands them a harness (harness.go) whose Fatal aborts the run and
// whose Cleanups run at its end.
//
// Then, for each of --loads (default idle,loaded), one rollout: spec.version
// goes to the other version (2.15.2 -> 2.15.1, then back). "idle" runs the
// probe publisher only (below: one publish at a time, some 2,000 a second
// on 2 cores, enough that a follower is often a few writes behind when the
// controller looks, so Settled flickers even then); "loaded" adds
// --load-publishers asynchronous publishers (nats.go PublishAsync, its
// defaults: 4000 acks in flight, --load-rate messages of --load-size bytes
// a second each, on BENCH.load.<i>) started --load-warmup before the
// rollout.
//
// Before each rollout (unless --bare-by-hand=false) one server is restarted
// by hand: its pod deleted as the controller deletes it (the highest
// ordinal that does not lead the JetStream meta group), under the same
// publishers, and timed as "bare" below; then the benchmark waits until
// the cluster is Settled and UpToDate again.
//
// What each figure is, per scenario (prefix s<servers>_<load>_):
//
//   - rollout_wall_seconds: from the patch of spec.version to the first
//     sample (every 200 ms) of the NatsCluster that is Progressing=False
//     UpToDate for its generation with status.version (every server's) the
//     new version. rollout_settled_seconds: to the first that is also Ready
//     AllServersReady and Settled AllGroupsCurrent
//     (framework.CheckSettledUpToDate); uptodate_to_settled_seconds is the
//     difference, and when it is over a second a comment gives what the
//     status said meanwhile. The benchmark waits for the latter before the
//     next scenario.
//   - step<k>_bare_seconds, bare_sum_seconds: bare restart-plus-catch-up of
//     the server of step k, measured inside the rollout: from the moment the
//     benchmark's pod informer (framework.Tracker) sees the pod's deletion
//     start (the step's pod delete; lame duck and exit included) to the first
//     sample of the benchmark's own observer (pkg/observe, every
//     --observe-every, 250 ms) that sees the gate as the controller's would
//     see it open: a new pod of that server Ready, every pod Ready, every
//     server answering, the server on the new version, Settled (every Raft
//     group led and every member current, AllGroupsCurrent). The first step
//     needs nothing of the controller between deletion and that moment, so
//     the sum over the steps is what the restarts cost by themselves; what
//     the rollout's wall time has beyond it is the controller's: the time
//     to the first step, each step's wait after the gate opened, and from
//     the last server current to the status saying UpToDate. Measured in the
//     same rollout rather than by hand, it restarts the same servers under
//     the same publishers at the same moment. When the controller stepped
//     before the observer saw the gate open (it observes on its own clock,
//     and under load Settled flickers between samples), the step's bare
//     time is cut at the next step's deletion (marked "cut" in the step's
//     comment line). step<k>_pod_ready_seconds and pod_ready_sum_seconds:
//     from the deletion to the new pod Ready (from the pod informer), a
//     lower bound of the bare time (the gate waits for PodsReady).
//   - rollout_wall_over_bare_sum: rollout_wall_seconds / bare_sum_seconds.
//   - first_step_after_change_seconds: from the patch to the first pod
//     deletion; step<k>_observed_open_to_step_seconds: from the observer's
//     gate-open sample after step k-1 to step k's pod deletion (can be
//     negative by up to a sample when the controller saw it first);
//     last_current_to_uptodate_seconds: from the last server seen current
//     to the UpToDate sample (negative when the status said UpToDate before
//     the observer saw the last server current and the cluster Settled).
//   - bare_by_hand_seconds: the same bare measure of the server restarted by
//     hand before the rollout (one pod deletion, same version), as a check
//     that the in-rollout figure is a restart's own cost.
//   - gate_to_step_{p50,p95,max}_seconds (histogram): the controller's own
//     nats_operator_gate_to_step_seconds{kind="RestartOne"}
//     (pkg/controller/metrics.go: from the planning time of the last sync
//     that found the gate closed to the start of the step that followed,
//     so an upper bound of how long the controller took to act once the
//     gate opened; the first step, not preceded by a wait, is not
//     observed), the buckets' increase over the rollout read as
//     Prometheus' histogram_quantile reads them (linear within a bucket);
//     max is the upper bound of the highest bucket that grew.
//   - step<k>_gate_to_step_seconds and gate_to_step_{p50,p95,max}_seconds
//     (exact): the same observations one by one, from the increase of the
//     histogram's _sum at each _count increment (the controller's /metrics
//     is read every 500 ms and steps are seconds apart); p50/p95 are the
//     nearest-rank values.
//   - step_duration_* and step<k>_step_duration_seconds: the same for
//     nats_operator_step_duration_seconds{kind="RestartOne"} (the step's
//     writes: ConfigMap, StatefulSet, pod delete).
//   - The comment line of each step names the server, and what its gate
//     waited on between the previous step and this one: the controller's
//     nats_operator_gate_waiting{waiting_for} gauge as read every 500 ms,
//     as time per check, and the last Progressing message seen before the
//     step.
//   - probe_*: one synchronous JetStream publisher on BENCH.probe (nats.go
//     defaults: ReconnectWait 2 s with 100 ms jitter, MaxReconnects 60,
//     connect timeout 2 s; jetstream.Publish's 5 s ack timeout and its 2
//     retries 250 ms apart on no responders; the server list is every pod's
//     nats://<podIP>:4222; 128-byte payloads, no message id), one publish at
//     a time, the next as soon as the ack came; after an error it waits 20
//     ms and publishes again. probe_max_ack_gap_seconds is the longest time
//     between two consecutive acks within the rollout, to
//     rollout_settled_seconds (a gap still open at its end counts whole;
//     gaps under 5 ms are not kept, so 0 means under 5 ms), with when and
//     which step's server was restarting in a comment; probe_errors counts failed publishes within it (and to the
//     end of a gap still open at its end), split into timeouts (no ack
//     within 5 s) and others; probe_acks and probe_ack_rate the acks.
//   - Each step's comment line also names the server's client connections
//     just before its deletion (its /connz, read every second): a server
//     in lame duck mode with no client shuts down at once, one with
//     clients first waits the grace period (nats-server's lameDuckMode),
//     which is most of a restart's cost at production timings.
//   - load_*: what the asynchronous publishers offered and got acknowledged
//     during the rollout, and their errors (async publish errors and
//     stalls: 4000 acks outstanding).
//
// Every figure is printed on a line of its own, "name: value unit";
// comment lines start with "#". Progress goes to stderr.
//
// --servers 3 --loads idle is a quick run (about a minute and a half); the
// default is the full run (3 and 5 servers, idle and loaded, about 5
// minutes on 2 cores).
package main
