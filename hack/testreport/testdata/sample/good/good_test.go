package good

import (
	"testing"
	"time"
)

func TestPasses(t *testing.T) {
	t.Log("a log line of a passing test, which plain go test does not show")
	time.Sleep(120 * time.Millisecond)
}

func TestTable(t *testing.T) {
	for _, name := range []string{"one", "two"} {
		t.Run(name, func(t *testing.T) { t.Parallel(); time.Sleep(30 * time.Millisecond) })
	}
}

func TestSkipped(t *testing.T) { t.Skip("not here") }
