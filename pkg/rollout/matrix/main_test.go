package matrix

import (
	"flag"
	"os"
	"testing"
)

// TestMain lets the route-compatibility matrix run six kinds of change at
// once unless -parallel is given: its servers spend most of a run idle,
// waiting out the stages that split, so the CPU count is not the limit.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "6")
	}
	os.Exit(m.Run())
}
