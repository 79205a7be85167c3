package rollout

import "testing"

func TestCountStreams(t *testing.T) {
	many := make([]StreamRef, 0, 7)
	for _, n := range []string{"A", "B", "C", "D", "E", "F", "G"} {
		many = append(many, StreamRef{Account: GlobalAccount, Name: n})
	}
	for _, tc := range []struct {
		streams []StreamRef
		want    string
	}{
		{nil, "no streams"},
		{[]StreamRef{{Account: GlobalAccount, Name: "ORDERS"}}, "1 stream (ORDERS in the global account)"},
		{[]StreamRef{{Account: GlobalAccount, Name: "ORDERS"}, {Account: "ACCT", Name: "APP"}},
			"2 streams (ORDERS in the global account; APP in account ACCT)"},
		{many, "7 streams (A, B, C, D, E in the global account, and 2 more)"},
	} {
		if got := CountStreams(tc.streams); got != tc.want {
			t.Errorf("CountStreams(%v) = %q, want %q", tc.streams, got, tc.want)
		}
	}
}
