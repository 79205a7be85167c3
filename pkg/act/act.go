package act

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-operator/nats-operator/internal/natsapi"
)

// Subjects of the system account and the JetStream API used here (see
// server/events.go and server/jetstream_api.go of nats-server).
const (
	subjectServerReload = "$SYS.REQ.SERVER.%s.RELOAD"
	subjectPeerRemove   = "$JS.API.SERVER.REMOVE"
	subjectEvacuate     = "$JS.API.SERVER.EVACUATE"
	subjectMetaStepDown = "$JS.API.META.LEADER.STEPDOWN"
)

// Errors of the JetStream API that callers act on (nats-server errors.json).
var (
	// ErrNotMember: the server is not (or no longer) a member of the meta
	// group; after a RemovePeer that timed out, it means the removal is done.
	ErrNotMember = errors.New("server is not a member of the meta group")
	// ErrMemberChangeInProgress: another peer removal is being committed.
	ErrMemberChangeInProgress = errors.New("a meta group member change is in progress")
)

// JetStream API error codes (err_code) mapped to the errors above.
const (
	errCodeNotMember              = 10044
	errCodeMemberChangeInProgress = 10202
)

// Conn is a connection to a cluster's system account: observe.SystemClient.
type Conn interface {
	// ServerID resolves a server name to its id (the one $SYS subjects
	// name).
	ServerID(ctx context.Context, name string) (string, error)
	// Request sends one request and returns the reply's payload.
	Request(ctx context.Context, subject string, body []byte) ([]byte, error)
}

// ReloadRefusedError is returned by Reload when the server answered the
// RELOAD with an error: its config was read and refused (an option that
// cannot change at runtime, a config that does not parse). The server keeps
// running its previous config. Errors of the transport (a timeout, no
// responders, a closed connection) are returned as they are, never as a
// ReloadRefusedError: they say nothing of the config.
type ReloadRefusedError struct {
	// Server is the name of the server that refused.
	Server string
	// Message is the server's error, e.g. "config reload not supported for
	// decreasing jetstream max memory and store".
	Message string
}

func (e *ReloadRefusedError) Error() string {
	return fmt.Sprintf("server %s refused to reload its config: %s", e.Server, e.Message)
}

// Reload makes the named server reload its config ($SYS.REQ.SERVER.<id>.RELOAD).
// A refusal by the server is a *ReloadRefusedError (use errors.As).
func Reload(ctx context.Context, c Conn, name string) error {
	id, err := c.ServerID(ctx, name)
	if err != nil {
		return err
	}
	b, err := c.Request(ctx, fmt.Sprintf(subjectServerReload, id), nil)
	if err != nil {
		return fmt.Errorf("reloading server %s: %w", name, err)
	}
	var w struct {
		Server *struct {
			Name string `json:"name"`
		} `json:"server"`
		Error *natsapi.APIError `json:"error"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("reloading server %s: decoding $SYS reply: %w", name, err)
	}
	if w.Error != nil {
		return &ReloadRefusedError{Server: name, Message: w.Error.Description}
	}
	if w.Server == nil || w.Server.Name != name {
		got := ""
		if w.Server != nil {
			got = w.Server.Name
		}
		return fmt.Errorf("reloading server %s: answered by %q", name, got)
	}
	return nil
}

// RemovePeer removes the named server from the JetStream meta group
// ($JS.API.SERVER.REMOVE); the server should be shut down for good first.
// The meta leader answers only once the removal is committed, so a timeout
// does not say it failed: observe the meta group and ask again. An error
// wrapping ErrNotMember then means the server is already gone;
// ErrMemberChangeInProgress means a removal is still being committed.
func RemovePeer(ctx context.Context, c Conn, name string) error {
	req, _ := json.Marshal(map[string]string{"peer": name})
	return jsRequest(ctx, c, subjectPeerRemove, req, "removing JetStream peer "+name)
}

// Evacuate moves every JetStream stream and consumer replica off the named
// server ($JS.API.SERVER.EVACUATE), before the server is shut down for good.
// The meta leader, the only server that answers (it may be the named server
// itself), gives every stream whose group has the server (or is converging
// towards a group that has it) a replacement peer and excludes the server
// from that group's placement, so it is not handed the stream back; the
// stream's consumers follow it. An R1 stream is moved too: its one copy
// migrates to the new peer, messages and consumer state with it.
//
// Evacuate returns once the new groups are proposed, before the data has
// moved: callers observe the stream and consumer groups until none lists the
// server and every replica is current. The server stays a member of the meta
// group (RemovePeer, once it has stopped, takes it out), and it is not
// cordoned: a stream created after the evacuation may be placed on it (with
// nats-server 2.15.2, as the emptiest server, it usually is), so check the
// groups again right before stopping it and evacuate again if one lists it.
// Evacuating a server again succeeds and moves only what is still there. An
// error wrapping ErrNotMember means no member of the meta group has the name.
func Evacuate(ctx context.Context, c Conn, name string) error {
	// The request names the server in "peer" (JSApiMetaServerEvacuateRequest);
	// nats-server refuses unknown fields.
	req, _ := json.Marshal(map[string]string{"peer": name})
	return jsRequest(ctx, c, subjectEvacuate, req, "evacuating JetStream server "+name)
}

// StepDownMetaLeader makes the JetStream meta leader step down
// ($JS.API.META.LEADER.STEPDOWN), preferring the named server as the next
// leader when preferred is not empty.
func StepDownMetaLeader(ctx context.Context, c Conn, preferred string) error {
	var req []byte
	if preferred != "" {
		req, _ = json.Marshal(map[string]any{"placement": map[string]string{"preferred": preferred}})
	}
	return jsRequest(ctx, c, subjectMetaStepDown, req, "stepping down the meta leader")
}

// jsRequest sends one JetStream API request and maps its error.
func jsRequest(ctx context.Context, c Conn, subject string, req []byte, what string) error {
	b, err := c.Request(ctx, subject, req)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	var r struct {
		Error   *natsapi.APIError `json:"error"`
		Success bool              `json:"success"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: decoding the response: %w", what, err)
	}
	if r.Error != nil {
		switch r.Error.ErrCode {
		case errCodeNotMember:
			return fmt.Errorf("%s: %w: %w", what, ErrNotMember, r.Error)
		case errCodeMemberChangeInProgress:
			return fmt.Errorf("%s: %w: %w", what, ErrMemberChangeInProgress, r.Error)
		}
		return fmt.Errorf("%s: %w", what, r.Error)
	}
	if !r.Success {
		return fmt.Errorf("%s: not successful", what)
	}
	return nil
}
