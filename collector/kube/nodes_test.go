package kube

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeUpdate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec corev1.NodeSpec
		addr []corev1.NodeAddress
		want string
	}{
		{"internal and external IPs, one pod CIDR", corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.240.1.2"}, {Type: corev1.NodeExternalIP, Address: "198.51.100.4"}, {Type: corev1.NodeHostName, Address: "n1"}},
			"n1 [10.240.1.2 198.51.100.4] [10.244.1.0/24]"},
		{"dual stack", corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.240.1.2"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"}},
			"n1 [10.240.1.2 fd00::2] [10.244.1.0/24 fd00:10:244:1::/64]"},
		{"only the old podCIDR field; a malformed address", corev1.NodeSpec{PodCIDR: "10.244.3.0/24"},
			[]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "not-an-ip"}},
			"n1 [] [10.244.3.0/24]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"x": "y"}}, Spec: tc.spec,
				Status: corev1.NodeStatus{Addresses: tc.addr, Images: []corev1.ContainerImage{{Names: []string{"big"}}}}}
			shrunk, err := shrinkNode(n)
			if err != nil {
				t.Fatal(err)
			}
			s := shrunk.(*corev1.Node)
			if len(s.Labels) != 0 || len(s.Status.Images) != 0 {
				t.Errorf("shrunk node keeps %v %v", s.Labels, s.Status.Images)
			}
			u := nodeUpdate(s)
			if got := fmt.Sprintf("%s %v %v", u.Name, u.Addrs, u.PodCIDRs); got != tc.want {
				t.Errorf("node update %s, want %s", got, tc.want)
			}
		})
	}
}
