package controller

import (
	"reflect"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"

	clusterv1beta1 "github.com/nats-operator/nats-operator/pkg/apis/cluster/v1beta1"
)

// statusChanges names what a status write changes: each condition whose
// status, reason or message changes ("Progressing"), and each other field
// of status by its JSON name ("servers"). It is logged with the write, so
// that the log says why a cluster's status was written.
func statusChanges(old, new *clusterv1beta1.NatsClusterStatus) []string {
	var changed []string
	for _, c := range new.Conditions {
		o := meta.FindStatusCondition(old.Conditions, c.Type)
		if o == nil || o.Status != c.Status || o.Reason != c.Reason || o.Message != c.Message || o.ObservedGeneration != c.ObservedGeneration {
			changed = append(changed, c.Type)
		}
	}
	for _, c := range old.Conditions {
		if meta.FindStatusCondition(new.Conditions, c.Type) == nil {
			changed = append(changed, c.Type)
		}
	}
	ov, nv := reflect.ValueOf(old).Elem(), reflect.ValueOf(new).Elem()
	t := ov.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Name == "Conditions" {
			continue
		}
		if !apiequality.Semantic.DeepEqual(ov.Field(i).Interface(), nv.Field(i).Interface()) {
			changed = append(changed, jsonName(f))
		}
	}
	return changed
}

func jsonName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	if tag == "" {
		return f.Name
	}
	return tag
}
