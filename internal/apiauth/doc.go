// Package apiauth lets an HTTP request through once the API server has
// authenticated its bearer token (a TokenReview) and authorized its verb on
// its path as a non-resource URL (a SubjectAccessReview), as Kubernetes
// components delegate it, with each answer cached for a while so a scrape
// every 15 s costs the API server about one review of each a minute.
//
// A flood of requests cannot turn into a flood of reviews: at most
// Options.MaxInFlight (8) reviews are in flight, and a request that needs
// one more is answered 429 Too Many Requests at once, without an API call;
// a request asking what is already under review (the same token, the same
// user and path) waits for that answer and takes no slot; and an answer,
// authenticated or not, is cached by the token's SHA-256, so a flood of
// one made-up token costs one TokenReview a minute. The caller gives the
// reviews a Kubernetes client of their own (cmd/nats-operator:
// reviewClient), so they wait on their own client-side rate limiter,
// never on the one leader election shares.
//
// It does what k8s.io/apiserver's authenticatorfactory and
// authorizerfactory do for the controller's /metrics, in two API calls:
// those packages doubled the controller's binary (106 MB against 50 MB)
// and added 19 MiB to its resident memory at start, most of it the
// code and package initialisation of what they import (CEL, OpenTelemetry,
// the API server's admission and feature machinery), which the two
// reviews do not need.
package apiauth
