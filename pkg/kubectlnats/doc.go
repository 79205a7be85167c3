// Package kubectlnats is the kubectl plugin kubectl-nats (cmd/kubectl-nats):
//
//	kubectl nats status NAME [-w] [-o json|yaml]
//	                                          one screen: servers, Settled, the rollout, holds, Events
//	kubectl nats plan -f new.yaml [--from old.yaml]
//	                                          what the controller would do with a manifest
//	kubectl nats restart-all NAME [--reset-jetstream]
//	kubectl nats force-step NAME SERVER
//	kubectl nats pause|resume NAME
//	kubectl nats version [-o json|yaml]       the plugin's version and commit (no cluster asked)
//
// plan never decides anything itself: it runs the controller's own gather
// and pure decide (controller.Decide) on the manifest, against the live
// cluster's objects (the controller's informers, controller.SourcesFor) and
// its servers' reports, or, with --from, against a simulated cluster that
// runs the old manifest settled (controller.StaticSources: client-go's
// listers over the simulated objects, and a fixed observation; no cluster,
// no fake clientset). Judge turns the planner's Decision into what plan
// prints and its exit code. The package uses the controller's public API
// only (Decide, Sources, Preview); it is not under internal/.
//
// Exit codes (ExitOK, ExitError, ExitHeld, ExitInvalid, ExitRefused):
//
//	0  plan: the change rolls, reloads, scales, or there is nothing to change; other commands: done
//	1  an error: bad usage, the cluster not reachable, a write refused
//	2  plan: the controller would hold the change (reason and message printed)
//	3  plan: the manifest is invalid (the field named): strict decoding,
//	   render's spec checks, and, against a live cluster, the API server's
//	   validation (OpenAPI and CEL rules) by a dry-run update
//	4  a command that puts data at stake was not confirmed (no tty and no --yes)
//
// Files: cli.go (commands, flags, exit codes), manifest.go (reading
// manifests), preview.go (the controller's decide phase, live or offline),
// verdict.go (Decision -> what plan says), plan.go and diff.go (plan's
// screen), status.go, actions.go (the annotations and fields the controller
// honours), version.go, fill.go (fitting prose in the screen's width).
package kubectlnats
