package observe

import (
	"testing"
)

// FuzzDecodeMonitoring feeds any bytes to every decoder, as the body of each
// monitoring endpoint and of a $SYS reply, and builds a snapshot's facts
// from whatever decoded: nothing may panic.
func FuzzDecodeMonitoring(f *testing.F) {
	for _, seed := range []string{
		`{}`, `null`, `[]`, `{"server_id":"N1","server_name":"demo-0","version":"2.15.2","metadata":{"config_revision":"abc"},"system_account":"$SYS","cluster":{"name":"demo","pool_size":3}}`,
		`{"trusted_operators_claim":[null,{"sub":"OABC","name":"op"}],"system_account":"AAA"}`,
		`{"server_id":"N1","meta_cluster":{"leader":"demo-0","replicas":[null,{"name":"demo-1","current":true,"lag":3}]},"total":2,"account_details":[null,{"name":"$G","id":"$G","stream_detail":[null,{"name":"S","cluster":{"leader":"demo-0","replicas":[{"name":"demo-1"},null]},"consumer_detail":[null,{"name":"C","cluster":null}]}]}]}`,
		`{"disabled":true}`,
		`{"routes":[null,{"remote_name":"demo-1","account":"$SYS"}]}`,
		`{"status":"unavailable","error":"JetStream not current"}`,
		`{"name":"demo","outbound_gateways":{"b":null,"c":{"connection":{"name":"x"}}}}`,
		`{"server":{"name":"demo-1","id":"N1","ver":"2.15.2"},"statsz":{"mem":1}}`,
		`{"name":"demo-1","host":"0.0.0.0","id":"N1"}`,
		`{"server":{"name":"demo-1"},"error":{"code":500,"description":"no"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := &report{addr: ServerAddr{Name: "demo-0", Host: "127.0.0.1"}}
		r.varz, _ = decodeVarz(b)
		if j, err := decodeJsz(b); err == nil {
			r.jsz = []*wireJsz{j, j}
		}
		r.routez, _ = decodeRoutez(b)
		r.healthz, _ = decodeHealthz(b)
		r.gatewayz, _ = decodeGatewayz(b)
		if r.varz == nil {
			r.fatal = "no varz"
		}
		expected := []string{"demo-0", "demo-1", "demo-2"}
		reports := []*report{r, {addr: ServerAddr{Name: "demo-1"}, fatal: "silent"}, r}
		var servers []Server
		for _, rep := range reports {
			servers = append(servers, buildServer(rep, expected))
		}
		groups, _ := buildGroups(reports)
		Judge(expected, servers, groups)
		for _, g := range groups {
			_ = g.Label()
		}
		_, _ = decodeReply(b)
	})
}
