package observe

import (
	"encoding/json"
	"fmt"
)

// The wire types below decode only the fields pkg/observe uses from the
// monitoring endpoints. Field names are those of nats-server v2.15
// (server/monitor.go: Varz, JSInfo, AccountDetail, StreamDetail,
// MetaClusterInfo, Routez, HealthStatus, Gatewayz; server/stream.go:
// ClusterInfo, PeerInfo). Keeping our own small types instead of importing
// the server's keeps nats-server out of the controller binary and makes
// decoding tolerant of fields added or removed between versions.

// wireVarz is the subset of /varz we read.
type wireVarz struct {
	ID       string            `json:"server_id"`
	Name     string            `json:"server_name"`
	Version  string            `json:"version"`
	Metadata map[string]string `json:"metadata"`
	Cluster  struct {
		Name     string `json:"name"`
		Port     int    `json:"cluster_port"`
		PoolSize int    `json:"pool_size"`
	} `json:"cluster"`
	Gateway struct {
		Name string `json:"name"`
	} `json:"gateway"`
	Leaf struct {
		Port    int        `json:"port"`
		Remotes []struct{} `json:"remotes"`
	} `json:"leaf"`
	TrustedOperatorsClaim []*wireOperatorClaim `json:"trusted_operators_claim"`
	SystemAccount         string               `json:"system_account"`
}

// wireOperatorClaim is the subset of a decoded NATS operator JWT in /varz.
type wireOperatorClaim struct {
	Subject string `json:"sub"`
	Name    string `json:"name"`
}

// wireJsz is one page of /jsz?accounts=true&streams=true&consumers=true&raft=true.
type wireJsz struct {
	ID       string         `json:"server_id"`
	Disabled bool           `json:"disabled"`
	Meta     *wireMeta      `json:"meta_cluster"`
	Accounts []*wireAccount `json:"account_details"`
	Total    int            `json:"total"`
}

// wireMeta is MetaClusterInfo.
type wireMeta struct {
	Name     string      `json:"name"`
	Leader   string      `json:"leader"`
	Replicas []*wirePeer `json:"replicas"`
	Size     int         `json:"cluster_size"`
}

// wireAccount is AccountDetail.
type wireAccount struct {
	Name    string        `json:"name"`
	ID      string        `json:"id"`
	Streams []*wireStream `json:"stream_detail"`
}

// wireStream is StreamDetail.
type wireStream struct {
	Name    string       `json:"name"`
	Cluster *wireCluster `json:"cluster"`
	State   struct {
		Msgs      uint64 `json:"messages"`
		Bytes     uint64 `json:"bytes"`
		Consumers int    `json:"consumer_count"`
		LastSeq   uint64 `json:"last_seq"`
	} `json:"state"`
	Consumers []*wireConsumer `json:"consumer_detail"`
}

// wireConsumer is the subset of ConsumerInfo we read.
type wireConsumer struct {
	Name    string       `json:"name"`
	Cluster *wireCluster `json:"cluster"`
}

// wireCluster is ClusterInfo. Replicas omits the reporting server itself
// when it knows a leader.
type wireCluster struct {
	Name      string      `json:"name"`
	RaftGroup string      `json:"raft_group"`
	Leader    string      `json:"leader"`
	Replicas  []*wirePeer `json:"replicas"`
}

// wirePeer is PeerInfo.
type wirePeer struct {
	Name    string `json:"name"`
	Current bool   `json:"current"`
	Offline bool   `json:"offline"`
	Pending bool   `json:"pending"`
	Lag     uint64 `json:"lag"`
	Peer    string `json:"peer"`
}

// wireRoutez is the subset of /routez we read.
type wireRoutez struct {
	Routes []*wireRoute `json:"routes"`
}

// wireRoute is RouteInfo; Account is set on an account's dedicated route.
type wireRoute struct {
	RemoteName string `json:"remote_name"`
	RemoteID   string `json:"remote_id"`
	Account    string `json:"account"`
}

// wireHealthz is HealthStatus.
type wireHealthz struct {
	Status string `json:"status"`
	Error  string `json:"error"`
}

// wireGatewayz is the subset of /gatewayz we read.
type wireGatewayz struct {
	Name     string `json:"name"`
	Outbound map[string]*struct {
		Connection *struct {
			Name string `json:"name"`
		} `json:"connection"`
	} `json:"outbound_gateways"`
}

// wireLeafz is the subset of /leafz we read.
type wireLeafz struct {
	Leafs []*struct {
		Name    string `json:"name"`
		IsSpoke bool   `json:"is_spoke"`
		Account string `json:"account"`
	} `json:"leafs"`
}

func decode[T any](endpoint string, b []byte) (*T, error) {
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", endpoint, err)
	}
	return v, nil
}

func decodeVarz(b []byte) (*wireVarz, error)         { return decode[wireVarz]("/varz", b) }
func decodeJsz(b []byte) (*wireJsz, error)           { return decode[wireJsz]("/jsz", b) }
func decodeRoutez(b []byte) (*wireRoutez, error)     { return decode[wireRoutez]("/routez", b) }
func decodeHealthz(b []byte) (*wireHealthz, error)   { return decode[wireHealthz]("/healthz", b) }
func decodeGatewayz(b []byte) (*wireGatewayz, error) { return decode[wireGatewayz]("/gatewayz", b) }
func decodeLeafz(b []byte) (*wireLeafz, error)       { return decode[wireLeafz]("/leafz", b) }
