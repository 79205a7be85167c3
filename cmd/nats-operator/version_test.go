package main

import "testing"

func TestVersionIsAskedAlone(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want bool
	}{
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{nil, false},
		{[]string{"--versions"}, false},
		{[]string{"--version", "--kubeconfig=x"}, false},
		{[]string{"backup", "--version"}, false},
	} {
		if got := versionRequested(tt.args); got != tt.want {
			t.Errorf("versionRequested(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}
