package backups

import (
	k8slabels "k8s.io/apimachinery/pkg/labels"
)

func everything() k8slabels.Selector { return k8slabels.Everything() }

func selector(k, v string) k8slabels.Selector {
	return k8slabels.SelectorFromSet(k8slabels.Set{k: v})
}
