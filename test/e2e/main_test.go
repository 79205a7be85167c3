package e2e

import (
	"os"
	"testing"

	"github.com/nats-operator/nats-operator/test/framework"
)

func TestMain(m *testing.M) {
	code := m.Run()
	framework.StopShared()
	framework.RemoveBinaries()
	os.Exit(code)
}
