package act

import "fmt"

// Subjects are the subjects this package's requests are published on,
// written as a NATS permission lists them (a server id as *): what a user
// of the system account must be allowed to publish for Reload, RemovePeer,
// Evacuate and StepDownMetaLeader. pkg/sysuser grants exactly these, with
// pkg/observe's, to the users it mints; the replies come on the
// connection's inbox (observe.SystemInboxes).
func Subjects() []string {
	return []string{fmt.Sprintf(subjectServerReload, "*"), subjectPeerRemove, subjectEvacuate, subjectMetaStepDown}
}
