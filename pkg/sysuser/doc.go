// Package sysuser mints the controller's own short-lived users of a NATS
// system account, for clusters in operator mode whose NatsOperatorTrust
// gives the system account's signing key (a Secret the cluster admin
// provides): a fresh user nkey and a user JWT issued by that key, expiring
// after a lifetime the controller chooses, so the controller can send $SYS
// requests (reload, peer removal, evacuation) without
// spec.auth.systemCredentials.
//
// A minted user may do only what the controller does (Permissions): publish
// the subjects of its requests, pkg/observe's SystemSubjects ($SYS.REQ.SERVER.*.IDZ,
// PING.IDZ, PING.JSZ) and pkg/act's Subjects ($SYS.REQ.SERVER.*.RELOAD,
// $JS.API.SERVER.REMOVE, $JS.API.SERVER.EVACUATE,
// $JS.API.META.LEADER.STEPDOWN), and subscribe to _INBOX.> for their
// replies. Without permissions it would have the whole system account,
// which in a supercluster spans every member: every account's connect
// events, every server's connections. live_test.go proves, on real
// servers, that each of the controller's requests works with them and that
// other requests and subscriptions are refused. (The controller's own user
// of a cluster without spec.auth, a password or nkey user rendered into
// every server's config, has no permissions: adding them would change
// every running cluster's config. A user of spec.auth.systemCredentials is
// the cluster admin's to restrict.)
//
// It only computes: the seed comes from the caller, the time is the
// caller's, and nothing is kept here (pkg/controller keeps the current user
// and mints the next one before the current one expires; its default
// lifetime is 15 minutes, since no request needs a user for long). A minted
// user is revoked by letting it expire, or at once by removing the signing
// key from the system account JWT.
package sysuser
