package bad

import (
	"fmt"
	"testing"
)

func TestFails(t *testing.T) {
	t.Log("before the failure")
	t.Errorf("got %d, want %d", 1, 2)
}

func TestSubtestFails(t *testing.T) {
	t.Run("passes", func(t *testing.T) { t.Log("hidden: a passing subtest") })
	t.Run("fails", func(t *testing.T) {
		fmt.Println("printed to stdout by the subtest")
		t.Fatal("the subtest fails")
	})
}

func TestPasses(t *testing.T) {}
