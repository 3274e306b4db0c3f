package cluster

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/drainwatch/drainwatch/testenv/workload"
)

// ServerPort is the port testenv's workload server listens on in pods.
const ServerPort = 8080

// ServerDeployment is a Deployment of testenv's workload server in mode
// (workload.ModeNaive, ModeProtocol, ModeIgnoreTerm) with a readiness probe
// on /ready every second; args are appended to --mode (e.g. "--drain-delay=1.5s").
func ServerDeployment(ns, name, mode string, replicas int32, args ...string) *appsv1.Deployment {
	lbl := map[string]string{"app": name}
	probe := &corev1.Probe{PeriodSeconds: 1, ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: lbl},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "server", Image: workload.ImageName, Args: append([]string{"--mode=" + mode}, args...),
					Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: ServerPort}},
					ReadinessProbe: probe,
				}}},
			},
		},
	}
}

// ServiceFor is a Service selecting app=name on port 80 → "http".
func ServiceFor(ns, name string) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}}},
	}
}

// Namespace is a Namespace object, for Apply.
func Namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name}}
}
