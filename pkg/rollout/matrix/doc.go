// Package matrix holds, as tests only, the matrices that establish the
// planner's tables (pkg/rollout) against real nats-server processes: which
// changes roll one server at a time, split a cluster or reset JetStream, and
// which a config reload applies; how a server is replaced or scaled away
// without losing a stream; what TLS on routes and clients does as it is
// turned on, reloaded and rotated. The servers are nats-server 2.15.1 and
// 2.15.2, built by hack/testbin.sh, running configs rendered by pkg/render
// and localized for loopback by pkg/render/rendertest. The package has no
// code of its own beyond this file.
//
// Files:
//   - matrix_test.go, matrix_cases_test.go: the route-compatibility matrix
//     (TestRouteCompatibilityMatrix): pairs of NatsCluster specs, three
//     servers moving from the old to the new one at a time; Classify must
//     find exactly each case's change kinds and EffectOf must say what the
//     servers did (Splits, ResetsJetStream).
//   - reload_matrix_test.go: the reload matrix (TestConfigReloadMatrix):
//     the same cases and reloadOnlyCases, applied by SIGHUP; EffectOf's
//     Reloads and ReloadsWithoutAuth must say what the servers took.
//   - reload_matrix_scaleup_test.go: what a scale-up does to the running
//     servers' routes (TestScaleUpRouteGossip).
//   - replace_matrix_test.go, scaledown_matrix_test.go: replacing a server
//     by an empty one and scaling one away, in the controller's order,
//     through pkg/observe's system client.
//   - tls_matrix_test.go: route and client TLS rolled out, reloaded,
//     rotated, and monitored.
//   - gateway_matrix_test.go: the gateway matrix (TestGatewayMatrix): a
//     supercluster of two clusters, east rolling a change of spec.gateway
//     under an R3 stream placed in west; and TestJoiningWithAMetaGroupOfItsOwn.
//     Every gateway case, and every leafnode case of the route and reload
//     matrices, runs on 2.15.2 and again on 2.15.1 ("(2.15.1)" in its name).
//   - standalone_matrix_test.go: one JetStream server (rendered standalone,
//     no cluster block) becoming three and three becoming one
//     (TestStandaloneServerJoiningACluster): Classify finds exactly
//     ChangeStandalone; the standalone server's streams are hidden at once
//     and deleted as orphans 30 s after the meta group recovers, and back
//     to standalone an R3 stream is not loaded (its files stay).
//   - The route-compatibility and reload matrices also hold the listener
//     cases (listenerCases): WebSocket, MQTT and the monitoring port's
//     HTTPS added, removed and changed side by side and reloaded.
//   - leader_restart_pause_test.go: a measurement, run only with
//     -measure-pause (the README quotes it).
//   - natsproc_test.go, systemuser_probe_test.go, helpers_test.go: the
//     harness (a server process on a loopback place, its monitoring
//     endpoints, the system user's probes) and three text helpers.
//   - main_test.go: TestMain runs six cases at once unless -parallel is
//     given (the servers wait more than they compute).
//
// The tests dot-import pkg/rollout: they were written inside it and are
// about its tables, so its names (ChangeKind, ChangeVersion, EffectOf,
// Classify, ConfigFacts) read as they did there. They use only its exported
// API; the tables they prove and the planner stay pure.
//
// Run by hand: go test ./pkg/rollout/matrix -count=1 (every case), or
//
//	go test ./pkg/rollout/matrix -count=1 -run '^TestRouteCompatibilityMatrix$/^changes$/^patch_version_up$'
//
// for one row. MATRIX_OUT=<file> keeps the route-compatibility table.
package matrix
