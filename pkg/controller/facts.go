package controller

import (
	"encoding/json"
	"strings"

	"github.com/nats-io/jwt/v2"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nats-operator/nats-operator/pkg/render"
	"github.com/nats-operator/nats-operator/pkg/rollout"
)

// configFile is the part of a rendered nats.conf (JSON) the planner's facts
// come from.
type configFile struct {
	Cluster struct {
		Name string `json:"name"`
	} `json:"cluster"`
	Operator        string            `json:"operator"`
	SystemAccount   string            `json:"system_account"`
	ResolverPreload map[string]string `json:"resolver_preload"`
	JetStream       *struct {
		Domain         string          `json:"domain"`
		MaxMemoryStore json.RawMessage `json:"max_memory_store"`
		MaxFileStore   json.RawMessage `json:"max_file_store"`
	} `json:"jetstream"`
	ServerTags []string `json:"server_tags"`
}

// configFacts reads the facts of a rendered config. version is the image
// tag the config runs under. An unreadable config gives empty facts, which
// differ from any target, so the planner never takes it as up to date.
func configFacts(conf []byte, version string) rollout.ConfigFacts {
	var f configFile
	if err := json.Unmarshal(conf, &f); err != nil {
		return rollout.ConfigFacts{Version: version}
	}
	facts := rollout.ConfigFacts{
		Version:     version,
		ClusterName: f.Cluster.Name,
		ServerTags:  f.ServerTags,
	}
	if f.Operator != "" {
		if oc, err := jwt.DecodeOperatorClaims(f.Operator); err == nil {
			facts.Operator = oc.Subject
		} else {
			facts.Operator = "undecodable"
		}
		facts.SystemAccount = f.SystemAccount
		for k := range f.ResolverPreload {
			if k != f.SystemAccount {
				facts.Accounts = append(facts.Accounts, k)
			}
		}
	}
	if js := f.JetStream; js != nil {
		facts.JetStream = true
		facts.JetStreamDomain = js.Domain
		facts.MaxMemoryStore = byteSize(js.MaxMemoryStore)
		facts.MaxFileStore = byteSize(js.MaxFileStore)
	}
	return facts
}

// byteSize reads a size given as a number or a quantity string.
func byteSize(raw json.RawMessage) int64 {
	if len(raw) == 0 {
		return 0
	}
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if q, err := resource.ParseQuantity(strings.TrimSuffix(strings.ToUpper(s), "B")); err == nil {
			return q.Value()
		}
	}
	return -1
}

// imageVersion is the tag of the nats container's image, e.g. 2.15.2 for
// nats:2.15.2@sha256:....
func imageVersion(sts *appsv1.StatefulSet) string {
	for _, c := range sts.Spec.Template.Spec.Containers {
		if c.Name != render.ContainerName {
			continue
		}
		img, _, _ := strings.Cut(c.Image, "@")
		if i := strings.LastIndex(img, ":"); i >= 0 && !strings.Contains(img[i:], "/") {
			return img[i+1:]
		}
	}
	return ""
}
