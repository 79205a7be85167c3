package release

import (
	"fmt"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/nats-operator/nats-operator/internal/image"
)

// jobImageFlag is the controller's flag naming the image of backup and
// restore Jobs.
const jobImageFlag = "--job-image="

// Render returns the kustomization at dir rendered as `kubectl kustomize`
// renders it, with the controller's Deployment (nats-operator) pinned to
// ref: every container of image.Repository runs ref, and its --job-image
// names ref (added when the manifests give none, else the controller's
// built-in default would name another image). It fails when the
// Deployment or such a container is missing, or when the result names
// image.Repository anywhere else.
func Render(dir, ref string) ([]byte, error) {
	opts := krusty.MakeDefaultOptions()
	// kubectl kustomize's default order: Namespaces and CRDs first, so
	// kubectl apply -f creates them before what lives in or uses them.
	opts.Reorder = krusty.ReorderOptionLegacy
	k := krusty.MakeKustomizer(opts)
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	pinned := 0
	for _, res := range m.Resources() {
		if res.GetKind() != "Deployment" || res.GetName() != "nats-operator" {
			continue
		}
		containers, err := res.Pipe(kyaml.Lookup("spec", "template", "spec", "containers"))
		if err != nil {
			return nil, err
		}
		if containers == nil {
			return nil, fmt.Errorf("%s: the Deployment nats-operator has no containers", dir)
		}
		elems, err := containers.Elements()
		if err != nil {
			return nil, err
		}
		for _, c := range elems {
			img, err := c.Pipe(kyaml.Lookup("image"))
			if err != nil || img == nil || !sameRepository(img.YNode().Value) {
				continue
			}
			img.YNode().Value = ref
			if err := pinJobImage(c, ref); err != nil {
				return nil, err
			}
			pinned++
		}
	}
	if pinned == 0 {
		return nil, fmt.Errorf("%s: no container of the Deployment nats-operator runs %s", dir, image.Repository)
	}
	out, err := m.AsYaml()
	if err != nil {
		return nil, err
	}
	if n := strings.Count(string(out), image.Repository); n != 2*pinned || strings.Count(string(out), ref) != 2*pinned {
		return nil, fmt.Errorf("%s: %s appears %d times, %d of them pinned to %s; want only the image and --job-image of each of the %d containers",
			dir, image.Repository, n, strings.Count(string(out), ref), ref, pinned)
	}
	return out, nil
}

// sameRepository reports whether an image reference is of
// image.Repository, whatever its tag or digest.
func sameRepository(ref string) bool {
	rest, ok := strings.CutPrefix(ref, image.Repository)
	return ok && (rest == "" || rest[0] == ':' || rest[0] == '@')
}

// pinJobImage sets the container's --job-image to ref.
func pinJobImage(c *kyaml.RNode, ref string) error {
	args, err := c.Pipe(kyaml.LookupCreate(kyaml.SequenceNode, "args"))
	if err != nil {
		return err
	}
	elems, err := args.Elements()
	if err != nil {
		return err
	}
	for _, a := range elems {
		if strings.HasPrefix(a.YNode().Value, jobImageFlag) {
			a.YNode().Value = jobImageFlag + ref
			// The manifests' line comment (what the flag is for) stays.
			return nil
		}
	}
	return args.PipeE(kyaml.Append(kyaml.NewScalarRNode(jobImageFlag + ref).YNode()))
}
