// Package sysuser mints the controller's own short-lived users of a NATS
// system account, for clusters in operator mode whose NatsOperatorTrust
// gives the system account's signing key (a Secret the cluster admin
// provides): a fresh user nkey and a user JWT issued by that key, expiring
// after a lifetime the controller chooses, so the controller can send $SYS
// requests (reload, peer removal, evacuation) without
// spec.auth.systemCredentials.
//
// It only computes: the seed comes from the caller, the time is the
// caller's, and nothing is kept here (pkg/controller keeps the current user
// and mints the next one before the current one expires). A minted user is
// revoked by letting it expire, or at once by removing the signing key from
// the system account JWT.
package sysuser
