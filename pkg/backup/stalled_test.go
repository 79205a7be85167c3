package backup

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// Only the server giving up on a restore for want of chunks is tried again
// (Restore): the error as request wraps it, seen in CI, and as a chunk's
// acknowledgement carries it; not a refusal or a timeout of the client.
func TestOnlyAStalledRestoreIsTriedAgain(t *testing.T) {
	stall := &apiError{Code: 500, ErrCode: 10062, Description: "restore failed: restore for stream '$G > EVENTS' is stalled"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("restoring stream EVENTS: %w", fmt.Errorf("$JS.API.STREAM.RESTORE.EVENTS: %w", stall)), true},
		{fmt.Errorf("restoring stream EVENTS at 0 bytes: %w", stall), true},
		{fmt.Errorf("restoring stream EVENTS: %w", &apiError{Code: 400, ErrCode: 10058, Description: "stream name already in use"}), false},
		{fmt.Errorf("restoring stream EVENTS: %w", nats.ErrTimeout), false},
		{errors.New("restore for stream '$G > EVENTS' is stalled"), false}, // not the server's answer
	} {
		if got := stalled(tc.err); got != tc.want {
			t.Errorf("stalled(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
