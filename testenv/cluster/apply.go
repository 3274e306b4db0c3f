package cluster

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/restmapper"
)

// fieldManager owns the fields testenv applies.
const fieldManager = "testenv"

// Apply server-side-applies typed objects (any built-in kind), in order, like
// `kubectl apply --server-side --force-conflicts`. Namespaced objects without a
// namespace go to "default".
func (c *Cluster) Apply(ctx context.Context, objs ...runtime.Object) error {
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("apply: dynamic client: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client.Discovery()))
	for _, obj := range objs {
		if err := applyOne(ctx, dyn, mapper, obj); err != nil {
			return err
		}
	}
	return nil
}

func applyOne(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, obj runtime.Object) error {
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		return fmt.Errorf("apply: unknown kind %T: %w", obj, err)
	}
	gvk := gvks[0]
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("apply: mapping %s: %w", gvk, err)
	}
	acc, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("apply: %T has no metadata: %w", obj, err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	body, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("apply: encoding %s %s: %w", gvk.Kind, acc.GetName(), err)
	}
	res := dyn.Resource(m.Resource)
	var ri dynamic.ResourceInterface = res
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := acc.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = res.Namespace(ns)
	}
	_, err = ri.Patch(ctx, acc.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptrTrue()})
	if err != nil {
		return fmt.Errorf("apply %s %s: %w", gvk.Kind, acc.GetName(), err)
	}
	return nil
}

func ptrTrue() *bool { t := true; return &t }
