package controller

import (
	"slices"
	"testing"
)

func TestParseNamespaces(t *testing.T) {
	for in, want := range map[string][]string{
		"":                 {""},
		" , ":              {""},
		"apps":             {"apps"},
		"apps,team-b":      {"apps", "team-b"},
		" apps , team-b,,": {"apps", "team-b"},
		"apps,apps":        {"apps"},
	} {
		if got := ParseNamespaces(in); !slices.Equal(got, want) {
			t.Errorf("ParseNamespaces(%q) = %q, want %q", in, got, want)
		}
	}
}
