package act

import (
	"context"
	"errors"
	"testing"
)

// replies is a Conn that answers each subject with a fixed payload. It
// proves only the decoding and the mapping of errors; the actions against
// real servers are proven in pkg/observe's tests (reload, refused reload,
// step down, remove peer, evacuate) and in the scale-down and replace
// matrices of pkg/rollout/matrix.
type replies map[string]string

func (r replies) ServerID(_ context.Context, name string) (string, error) { return "ID-" + name, nil }

func (r replies) Request(_ context.Context, subject string, _ []byte) ([]byte, error) {
	b, ok := r[subject]
	if !ok {
		return nil, errors.New("nats: no responders available for request")
	}
	return []byte(b), nil
}

func TestActionsMapTheServersAnswers(t *testing.T) {
	ctx := context.Background()
	c := replies{
		"$SYS.REQ.SERVER.ID-demo-1.RELOAD": `{"server":{"name":"demo-1"},"data":{}}`,
		"$SYS.REQ.SERVER.ID-demo-2.RELOAD": `{"server":{"name":"demo-2"},"error":{"code":500,"description":"config reload not supported for cluster name"}}`,
		"$SYS.REQ.SERVER.ID-demo-3.RELOAD": `{"server":{"name":"demo-30"},"data":{}}`,
		"$JS.API.SERVER.REMOVE":            `{"type":"io.nats.jetstream.api.v1.meta_server_remove_response","error":{"code":400,"err_code":10044,"description":"peer not a member"}}`,
		"$JS.API.SERVER.EVACUATE":          `{"error":{"code":503,"err_code":10202,"description":"meta group member change in progress"}}`,
		"$JS.API.META.LEADER.STEPDOWN":     `{"success":true}`,
	}
	if err := Reload(ctx, c, "demo-1"); err != nil {
		t.Errorf("Reload(demo-1) = %v; want nil", err)
	}
	var refused *ReloadRefusedError
	if err := Reload(ctx, c, "demo-2"); !errors.As(err, &refused) || refused.Server != "demo-2" || refused.Message != "config reload not supported for cluster name" {
		t.Errorf("Reload(demo-2) = %v; want a ReloadRefusedError with the server's words", err)
	}
	if err := Reload(ctx, c, "demo-3"); err == nil || errors.As(err, &refused) {
		t.Errorf("Reload(demo-3) answered by demo-30 = %v; want an error that is no refusal", err)
	}
	if err := Reload(ctx, c, "demo-4"); err == nil || errors.As(err, &refused) {
		t.Errorf("Reload(demo-4) with no responders = %v; want the transport's error, no refusal", err)
	}
	if err := RemovePeer(ctx, c, "demo-4"); !errors.Is(err, ErrNotMember) {
		t.Errorf("RemovePeer = %v; want ErrNotMember", err)
	}
	if err := Evacuate(ctx, c, "demo-4"); !errors.Is(err, ErrMemberChangeInProgress) {
		t.Errorf("Evacuate = %v; want ErrMemberChangeInProgress", err)
	}
	if err := StepDownMetaLeader(ctx, c, "demo-0"); err != nil {
		t.Errorf("StepDownMetaLeader = %v; want nil", err)
	}
	c["$JS.API.META.LEADER.STEPDOWN"] = `{}`
	if err := StepDownMetaLeader(ctx, c, ""); err == nil {
		t.Error("StepDownMetaLeader answered without success = nil; want an error")
	}
}
