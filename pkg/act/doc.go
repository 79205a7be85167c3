// Package act sends the requests that change a running NATS cluster: make
// one server reload its config, move a server's JetStream streams and
// consumers off it (evacuate), remove a stopped server from the JetStream
// meta group, and make the meta leader step down. Looking at the cluster
// is pkg/observe's job; this package only acts, through the system
// account connection observe opens (observe.SystemClient satisfies Conn),
// so a reader of observe knows it never changes anything.
//
// Each action returns once the server (or the meta leader) answered; what
// the action did is confirmed by observing again, never assumed from the
// answer: a reload by the config revision the server reports, an
// evacuation by the groups that no longer list the server, a removal by the
// meta group. Errors the controller acts on are typed: *ReloadRefusedError
// (the server read its new config and refused it), ErrNotMember and
// ErrMemberChangeInProgress (errors of the JetStream API). Errors of the
// transport are returned as they are: they say nothing of the change.
//
// Subjects lists the subjects the actions are published on, which the
// system account users pkg/sysuser mints are allowed (and, with pkg/observe's,
// nothing else).
package act
