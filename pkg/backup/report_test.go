package backup_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/nats-operator/nats-operator/pkg/backup"
)

// A report reads back as it was written; one with more streams than a
// termination message holds keeps what fits, counts the rest in More, and
// keeps the error line; text that is no report is refused.
func TestReportsReadBackAndFitATerminationMessage(t *testing.T) {
	small := backup.Report{Streams: []backup.StreamReport{{Name: "ORDERS", Messages: 100000, Bytes: 5 << 20, FirstSeq: 1, LastSeq: 100000, Consumers: 1, DataBytes: 1 << 20}}}
	got, err := backup.ParseReport(small.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(small, got); d != "" {
		t.Errorf("round trip (-want +got):\n%s", d)
	}

	var big backup.Report
	for i := range 200 {
		big.Streams = append(big.Streams, backup.StreamReport{Name: fmt.Sprintf("STREAM_WITH_A_LONG_NAME_%03d", i), Messages: 1 << 40, Bytes: 1 << 50, FirstSeq: 1, LastSeq: 1 << 40, DataBytes: 1 << 45})
	}
	big.Reason, big.Message = backup.ReasonFailed, strings.Repeat("why ", 1000)
	text := big.Encode()
	if len(text) > backup.MaxReportBytes {
		t.Fatalf("the report is %d bytes, more than %d", len(text), backup.MaxReportBytes)
	}
	got, err = backup.ParseReport(text)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Streams)+got.More != 200 || got.More == 0 || got.Reason != backup.ReasonFailed || !strings.HasPrefix(got.Message, "why why") {
		t.Errorf("read back %d streams, %d more, reason %q", len(got.Streams), got.More, got.Reason)
	}
	t.Logf("%d of 200 streams fit in %d bytes, %d counted in more", len(got.Streams), len(text), got.More)

	if _, err := backup.ParseReport("panic: runtime error\n"); err == nil {
		t.Error("a crash's log read as a report")
	}
}
