package scale

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// nodeName names the i-th hollow node.
func nodeName(i int) string { return fmt.Sprintf("hollow-%04d", i) }

// registerNodes creates Ready Nodes with room for 110 pods each, the
// kubelet's default, so the scheduler spreads pods as in a real cluster.
func registerNodes(ctx context.Context, c kubernetes.Interface, n int) ([]string, error) {
	names := make([]string, 0, n)
	for i := range n {
		node := hollowNode(nodeName(i))
		if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("registering node %s: %w", node.Name, err)
		}
		names = append(names, node.Name)
	}
	return names, nil
}

func hollowNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")}
	now := metav1.Now()
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue,
				Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now}}},
	}
}

// workload is one Deployment and the Service selecting its pods.
type workload struct{ namespace, name string }

// createWorkloads spreads pods over namespaces x deployments, each
// Deployment with a Service, so the endpointslice controller keeps slices
// (≤ 100 endpoints each) that a rollout rewrites.
func createWorkloads(ctx context.Context, c kubernetes.Interface, cfg Config) ([]workload, error) {
	var out []workload
	perDeploy := int32(cfg.Pods / (cfg.Namespaces * cfg.DeploymentsPerNamespace))
	for i := range cfg.Namespaces {
		ns := fmt.Sprintf("scale-%02d", i)
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("creating namespace %s: %w", ns, err)
		}
		for j := range cfg.DeploymentsPerNamespace {
			w := workload{namespace: ns, name: fmt.Sprintf("app-%02d", j)}
			if err := w.create(ctx, c, perDeploy); err != nil {
				return nil, err
			}
			out = append(out, w)
		}
	}
	return out, nil
}

func (w workload) labels() map[string]string { return map[string]string{"app": w.name} }

func (w workload) create(ctx context.Context, c kubernetes.Interface, replicas int32) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.namespace},
		Spec:       corev1.ServiceSpec{Selector: w.labels(), Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := c.CoreV1().Services(w.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating service %s/%s: %w", w.namespace, w.name, err)
	}
	grace := int64(5)
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: w.namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: w.labels()},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: w.labels()},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: &grace,
					Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/hollow:1",
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}},
				},
			},
		},
	}
	if _, err := c.AppsV1().Deployments(w.namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating deployment %s/%s: %w", w.namespace, w.name, err)
	}
	return nil
}

// restart is `kubectl rollout restart`: a new template annotation.
func (w workload) restart(ctx context.Context, c kubernetes.Interface) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`,
		time.Now().Format(time.RFC3339Nano))
	_, err := c.AppsV1().Deployments(w.namespace).Patch(ctx, w.name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("restarting %s/%s: %w", w.namespace, w.name, err)
	}
	return nil
}

// settled reports whether the rollout is complete and the old pods are
// gone: every pod of the namespace is an updated, available replica.
func (w workload) settled(ctx context.Context, c kubernetes.Interface) (bool, error) {
	d, err := c.AppsV1().Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	want := *d.Spec.Replicas
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want &&
		s.Replicas == want && s.ReadyReplicas == want, nil
}

// deleteEvents removes the Events of earlier rollouts, so every design
// starts from the same state: otherwise the naive design's first list of
// every pod Event would grow with each design run before it.
func (c *cluster) deleteEvents(ctx context.Context) error {
	seen := map[string]bool{}
	for _, w := range c.workloads {
		if seen[w.namespace] {
			continue
		}
		seen[w.namespace] = true
		if err := c.admin.CoreV1().Events(w.namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			return fmt.Errorf("deleting the Events of %s: %w", w.namespace, err)
		}
	}
	return nil
}
