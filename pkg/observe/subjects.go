package observe

import (
	"fmt"

	"github.com/nats-io/nats.go"
)

// SystemSubjects are the subjects SystemClient publishes on for the
// controller, written as a NATS permission lists them (a server id as *):
// the check that a new connection is in the system account
// ($SYS.REQ.SERVER.<id>.IDZ), ServerID's fan-out (PING.IDZ, which
// pkg/act's Reload resolves its server with) and the JSZ fan-out that
// finds a supercluster's meta leader in another cluster (PING.JSZ).
// Ping of any other kind (Statsz, VARZ, HEALTHZ) is not among them: the
// controller sends none, and a user allowed only these gets no reply to
// it. pkg/sysuser grants exactly these, with pkg/act's, to the users it
// mints.
func SystemSubjects() []string {
	return []string{fmt.Sprintf(subjectServerIDZ, "*"), subjectPing + PingIDZ, subjectPing + PingJsz}
}

// SystemInboxes are the subjects SystemClient subscribes to: the replies
// of its requests and fan-outs come on inboxes under nats.go's default
// prefix (_INBOX.), which System does not change.
func SystemInboxes() []string {
	return []string{nats.InboxPrefix + ">"}
}
