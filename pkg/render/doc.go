// Package render turns a NatsCluster and its resolved trust into the objects
// every server runs from: each server's nats.conf (JSON), ConfigMap and
// StatefulSet, the client and headless Services, the PodDisruptionBudget, and
// the target config revision.
//
// The package is pure: it imports only pkg/apis, k8s.io/api,
// k8s.io/apimachinery, nats-io/jwt and nkeys and the standard library, reads
// no clock, does no I/O and never logs. The same Input renders the same
// bytes, whatever the order of maps in it.
//
// # Entry point
//
//	out, err := render.Render(render.Input{Cluster: nc, Trust: trust})
//
// Trust is nil when spec.auth is absent and required when it is present. A
// trust that fails validation returns a *TrustError (errors.As) whose Reason
// is clusterv1beta1.ReasonTrustInvalid or ReasonAccountTrustInvalid (or
// ReasonTrustNotFound / ReasonAccountTrustNotFound when the controller did not
// pass a referenced trust), whose Check names the failed check, and nothing
// is rendered. Whether the system credentials Secret exists changes no
// rendered object, so it is not an input: the controller checks it.
//
// Input.PodTemplatePolicy is the controller's pod template policy
// (--pod-template-policy, policy.go): under PodTemplatePolicyRestricted a
// podTemplate naming another ServiceAccount, a Secret, claim, CSI,
// hostPath, ephemeral or token volume, or an env var from a Secret, or an
// image (sidecar, spec.image, spec.metrics.image) off the allow-list, is a
// *SpecError naming the field and the policy, checked against each
// server's pod before the podTemplate is merged; nothing is rendered. The
// zero value (PodTemplatePolicyAny) checks nothing.
//
// SystemUser is the controller's user of the built-in system account $SYS,
// for clusters without spec.auth (Render refuses one with it): every
// server's config then has an accounts block with that one user and its
// bcrypt hash. Anonymous clients still land in the global account with
// their streams (see SystemUser for what changes for clients). Nil renders
// the config of before, byte for byte.
//
// SharedObjects renders the Services and the PDB alone: they depend on the
// cluster's name only, so the controller keeps them in place while the spec
// cannot render. The names and labels every object gets are exported
// (ServerName, PodName, ConfigMapName, PVCName, HeadlessServiceName,
// RouteURL, ServerOrdinal, ClusterLabels, ServerLabels, OwnerReference) for
// the controller and tests; rendertest holds fixture builders (NatsClusters,
// NATS trust, creds) and an in-process loopback runner for rendered configs.
//
// Fields of the StatefulSet that kube-apiserver would default are rendered
// with those defaults, so a StatefulSet read back compares equal
// (apiequality.Semantic) to the rendered one; a test checks this against a
// real kube-apiserver.
//
// # The revisions
//
// Each server has a template revision: the first 10 hex characters of a
// SHA-256 over its StatefulSet spec without the two revision annotations
// (JSON, whose maps encoding/json sorts, with resource quantities in one
// canonical form so that 1Gi and 1073741824 give the same revision). It is
// written into the pod template as cluster.nats-operator.io/template-revision;
// TemplateRevisionOf reads it back (and computes it for a StatefulSet written
// before the annotation existed).
//
// Each server has its own config revision (Server.Revision): the first 10
// hex characters of a SHA-256 over its nats.conf rendered without the
// revision and its template revision. It is written into the server's
// nats.conf as server_metadata.config_revision (what the server reports in
// /varz, the proof it runs the config) and into its pod template as
// cluster.nats-operator.io/config-revision, the config the pod is restarted
// for. A change of the config alone leaves the template revision alone, so a
// config could be applied without a restart; Services and the PDB enter
// neither revision. Every server's cluster.routes lists the first
// SeedServers servers only (the others are learnt by route gossip), so a
// server added by a scale-up changes no other server's config or revision.
//
// The cluster's revision (Output.Revision, status.config.revision) is the
// revision every server carries when they all carry the same one (a single
// server; servers an older release wrote), else a SHA-256 over the servers'
// revisions in ordinal order.
//
// Input.Running are the servers' existing objects. When a server's ConfigMap
// and StatefulSet equal the rendered ones apart from the revisions and carry
// one config revision, that revision is kept: an upgrade of the controller
// that computes revisions differently restarts no server whose objects it
// would not change.
//
// # Facts and reading configs back
//
// Server.Facts are the facts of the config the planner classifies (Facts,
// identical to rollout.ConfigFacts). Every field of the rendered config is a
// fact or on configFields' list of fields proven to roll one server at a
// time; a test fails for a field that is neither. ReadConfig reads the facts
// and revision of an existing server's nats.conf: the one place the format is
// read back.
//
// # Rendered facts the controller and planner rely on
//
//   - Paths: config /etc/nats-config/nats.conf (ConfigMap key nats.conf), data
//     volume "data" at /data, JetStream store /data/jetstream, resolver
//     directory /data/resolver, pid file /var/run/nats/nats.pid (emptyDir
//     "pid").
//   - Lame duck: lame_duck_duration and lame_duck_grace_period are
//     spec.lameDuck's duration and gracePeriod (LameDuckOf), by default 30s
//     (the server's minimum) and 10s. The grace period is part of the
//     duration, and the server closes its clients at most a second apart
//     after it, so it exits at most about the duration after the preStop
//     signal (3 clients: 11.1s at 30s/10s, 2.9s at 30s/1s).
//     terminationGracePeriodSeconds is duration + grace period + 20s
//     (TerminationGracePeriodOf; 60 by default). nats-server ignores SIGTERM
//     while in lame duck mode, so the preStop signal decides the exit. Both
//     are facts (LameDuckDuration, LameDuckGracePeriod): nats-server reloads
//     neither.
//   - One server with JetStream has no cluster block (standalone; facts
//     ClusterName ""): with a block naming only itself nats-server waits for
//     meta peers forever. spec.websocket and spec.mqtt are blocks of their
//     own with the client TLS block unless noTLS (listeners.go), on the pod,
//     both Services and the NetworkPolicy's client rule.
//   - Probes (HTTP GET on port 8222, HTTPS with spec.monitoring.tls), chosen
//     by spec.version; see probes.go:
//     from 2.11 on, startup /healthz?js-meta-only=true, readiness
//     /healthz?js-server-only=true, liveness /healthz?js-enabled-only=true.
//     Before 2.11 js-meta-only does not exist and js-server-only meant what
//     js-meta-only means now, so startup uses /healthz?js-server-only=true and
//     readiness and liveness /healthz?js-enabled-only=true.
//   - A server's config revision is in its config and pod template, so any
//     change of its config changes both. Write a server's ConfigMap before
//     its StatefulSet: the pod the StatefulSet restarts mounts the ConfigMap
//     as it is then.
package render
