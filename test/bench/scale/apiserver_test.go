package main

import "testing"

// The API server's request counts are summed by verb, resource and
// subresource over every other label (code, scope, component, ...);
// watches are left out, and the difference of two readings is what was
// served between them.
func TestAPIServerRequestsAreSummedByVerbAndResource(t *testing.T) {
	before := parseAPIServerRequests(`# HELP apiserver_request_total Counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="WATCH",version="v1"} 3
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2.5
`)
	after := parseAPIServerRequests(`apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 14
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="configmaps",scope="resource",subresource="",verb="PUT",version="v1"} 5
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="WATCH",version="v1"} 9
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 4
`)
	d := after.minus(before)
	if len(d) != 2 {
		t.Fatalf("kinds %v, want PATCH pods/status and PUT configmaps", d)
	}
	if got := d["PATCH pods/status"]; got == nil || got.count != 6 || got.seconds != 1.5 {
		t.Errorf("PATCH pods/status = %+v, want 6 requests, 1.5 s", got)
	}
	if got := d["PUT configmaps"]; got == nil || got.count != 5 {
		t.Errorf("PUT configmaps = %+v, want 5 requests", got)
	}
}

// The flow-control wait is summed over every flow schema and priority
// level; the histogram's buckets and other series are not counted.
func TestParseFlowControlWait(t *testing.T) {
	w := parseFlowControlWait(`apiserver_flowcontrol_request_wait_duration_seconds_bucket{execute="true",flow_schema="service-accounts",priority_level="workload-low",le="0.005"} 900
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 0.25
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="service-accounts",priority_level="workload-low"} 1000
apiserver_flowcontrol_request_wait_duration_seconds_sum{execute="true",flow_schema="global-default",priority_level="global-default"} 1.5
apiserver_flowcontrol_request_wait_duration_seconds_count{execute="true",flow_schema="global-default",priority_level="global-default"} 20
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 311
`)
	if w.count != 1020 || w.seconds != 1.75 {
		t.Errorf("parseFlowControlWait = %+v, want 1020 requests, 1.75 s", w)
	}
}
