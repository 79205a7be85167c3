package main

// The image is built on nothing (internal/image): it holds no CA
// certificates where Go looks for the system's. This package gives Go
// Mozilla's roots for when the system has none, so an HTTPS monitoring
// endpoint whose cluster names no CA (verified against the system's roots,
// pkg/observe) is verified as it would be on a base image with CA
// certificates. Where the system has roots, they are used instead.
import _ "golang.org/x/crypto/x509roots/fallback"
