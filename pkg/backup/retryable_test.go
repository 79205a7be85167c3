package backup

import (
	"errors"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// Only a restore the server gave up on in a way another attempt gets past
// is tried again (Restore): for want of chunks, and its stream's directory
// removed as it was made; each as request wraps it and as a chunk's
// acknowledgement or the last answer carries it, in the words seen in CI.
// Not a refusal, another storage error, or a timeout of the client.
func TestOnlyARestoreAnotherAttemptGetsPastIsTriedAgain(t *testing.T) {
	stall := &apiError{Code: 500, ErrCode: 10062, Description: "restore failed: restore for stream '$G > EVENTS' is stalled"}
	gone := &apiError{Code: 500, ErrCode: 10062, Description: "restore failed: error adding stream: could not create storage directory - mkdir " +
		"/data/jetstream/jetstream/AAKUTIPTSAUB3BHL4U4E4PJCGEP4CZ57Z5UXZJMLWXXDEU7MKWFWWQBU/streams: no such file or directory (10077)"}
	full := &apiError{Code: 500, ErrCode: 10062, Description: "restore failed: error adding stream: could not create storage directory - mkdir " +
		"/data/jetstream/jetstream/ACC/streams: no space left on device (10077)"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("restoring stream EVENTS: %w", fmt.Errorf("$JS.API.STREAM.RESTORE.EVENTS: %w", stall)), true},
		{fmt.Errorf("restoring stream EVENTS at 0 bytes: %w", stall), true},
		{fmt.Errorf("restoring stream EVENTS: %w", gone), true},
		{fmt.Errorf("restoring stream EVENTS at 131072 bytes: %w", gone), true},
		{fmt.Errorf("restoring stream EVENTS: %w", full), false},
		{fmt.Errorf("restoring stream EVENTS: %w", &apiError{Code: 400, ErrCode: 10058, Description: "stream name already in use"}), false},
		{fmt.Errorf("restoring stream EVENTS: %w", nats.ErrTimeout), false},
		{errors.New("restore for stream '$G > EVENTS' is stalled"), false}, // not the server's answer
		{errors.New(gone.Description), false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
