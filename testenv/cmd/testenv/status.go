package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// status prints the supervisor, the API server and the nodes.
func status(dir string) error {
	s, err := readState(dir)
	if err != nil {
		return err
	}
	pid := supervisorPID(dir)
	if pid == 0 {
		return fmt.Errorf("supervisor %d is gone; run testenv down to clean up", s.PID)
	}
	fmt.Printf("supervisor pid %d, log %s\nKUBECONFIG=%s\napiserver %s\nfabric netns %s\n", pid, s.Log, s.Kubeconfig, s.URL, s.Fabric)
	rc, err := clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	c, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("building client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("apiserver not answering: %w", err)
	}
	for _, n := range nodes.Items {
		ready := "NotReady"
		for _, cond := range n.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == "True" {
				ready = "Ready"
			}
		}
		fmt.Printf("node %s %s podCIDR %s\n", n.Name, ready, n.Spec.PodCIDR)
	}
	return nil
}
