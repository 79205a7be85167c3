package natsapi

import (
	"encoding/json"
	"testing"
)

func TestAPIErrorReadsAsTheServerSaidIt(t *testing.T) {
	for _, tc := range []struct{ reply, want string }{
		{`{"code":400,"err_code":10044,"description":"peer not a member"}`, "peer not a member (code 400, err_code 10044)"},
		{`{"code":500,"description":"config reload not supported for cluster name"}`, "config reload not supported for cluster name (code 500)"},
	} {
		var e APIError
		if err := json.Unmarshal([]byte(tc.reply), &e); err != nil {
			t.Fatal(err)
		}
		if got := e.Error(); got != tc.want {
			t.Errorf("%s: Error() = %q; want %q", tc.reply, got, tc.want)
		}
	}
}
