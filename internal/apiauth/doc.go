// Package apiauth lets an HTTP request through once the API server has
// authenticated its bearer token (a TokenReview) and authorized its verb on
// its path as a non-resource URL (a SubjectAccessReview), as Kubernetes
// components delegate it, with each answer cached for a while so a scrape
// every 15 s costs the API server about one review of each a minute.
//
// It does what k8s.io/apiserver's authenticatorfactory and
// authorizerfactory do for the controller's /metrics, in two API calls:
// those packages doubled the controller's binary (106 MB against 50 MB)
// and added 19 MiB to its resident memory at start, most of it the
// code and package initialisation of what they import (CEL, OpenTelemetry,
// the API server's admission and feature machinery), which the two
// reviews do not need.
package apiauth
