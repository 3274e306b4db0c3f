package runtime

import (
	"fmt"
	"os"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ReadDaemonSet parses the DaemonSet manifest (deploy/daemonset/base).
func ReadDaemonSet(path string) (*appsv1.DaemonSet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(b, &ds); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	if len(ds.Spec.Template.Spec.Containers) != 1 {
		return nil, fmt.Errorf("%s: %d containers, want 1", path, len(ds.Spec.Template.Spec.Containers))
	}
	return &ds, nil
}

// Flags turns the pod's security context and hostPath mounts into ctr run
// flags giving the OCI spec the CRI would: capabilities exactly as listed
// (drop ALL, add ...), containerd's default seccomp profile for
// RuntimeDefault (the CRI and ctr --seccomp both apply
// contrib/seccomp.WithDefaultProfile), a read-only root, no new
// privileges, the host PID namespace and the same bind mounts. hostPaths
// maps a host path to the one the test uses instead (the state directory),
// and "secret:<name>" to the directory holding a Secret volume's files;
// anything ctr cannot express is an error, never silently dropped.
func Flags(ds *appsv1.DaemonSet, hostPaths map[string]string) ([]string, error) {
	pod := ds.Spec.Template.Spec
	c := pod.Containers[0]
	sc := c.SecurityContext
	if sc == nil {
		return nil, fmt.Errorf("container %s has no securityContext", c.Name)
	}
	var flags []string
	if sc.Privileged != nil && *sc.Privileged {
		flags = append(flags, "--privileged")
	}
	// The image's USER is nonroot (tools/oci): runAsUser replaces it, as
	// the CRI does. ctr 1.6 has no --user; the runc wrapper sets the uid
	// from this annotation (gid = uid: root's group for runAsUser 0).
	if sc.RunAsUser == nil {
		return nil, fmt.Errorf("container %s has no runAsUser: it would run as the image's nonroot USER without its capabilities", c.Name)
	}
	flags = append(flags, "--annotation", fmt.Sprintf("%s=%d", runAsUserAnnotation, *sc.RunAsUser))
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		flags = append(flags, "--allow-new-privs")
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		flags = append(flags, "--read-only")
	}
	switch p := sc.SeccompProfile; {
	case p == nil || p.Type == corev1.SeccompProfileTypeUnconfined:
	case p.Type == corev1.SeccompProfileTypeRuntimeDefault:
		flags = append(flags, "--seccomp")
	default:
		return nil, fmt.Errorf("seccompProfile %s: not expressed here", p.Type)
	}
	// ctr applies no AppArmor profile unless asked: that is Unconfined.
	if p := sc.AppArmorProfile; p != nil && p.Type != corev1.AppArmorProfileTypeUnconfined {
		return nil, fmt.Errorf("appArmorProfile %s: not expressed here", p.Type)
	}
	capFlags, err := capabilityFlags(sc.Capabilities)
	if err != nil {
		return nil, err
	}
	flags = append(flags, capFlags...)
	if pod.HostPID {
		// ctr --with-ns pid:/proc/1/ns/pid makes runc 1.1.5 fail ("can't
		// get final child's PID from pipe"); the CRI instead leaves the
		// pid namespace out of the spec, which HostPIDWrapper does.
		flags = append(flags, "--annotation", hostPIDAnnotation+"=true")
	}
	if pod.HostNetwork {
		flags = append(flags, "--net-host")
	}
	mounts, err := mountFlags(pod, c, hostPaths)
	return append(flags, mounts...), err
}

// defaultCaps is the set containerd 1.6's default spec starts from. ctr
// rejects --cap-drop ALL (and ignores CAP_ALL), so drop ALL is each of them.
var defaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD",
	"CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}

// capabilityFlags: the CRI computes drop ALL + add X as exactly X in the
// bounding, effective and permitted sets; with ctr that is every default
// dropped and X added (the test checks the resulting spec).
func capabilityFlags(caps *corev1.Capabilities) ([]string, error) {
	if caps == nil {
		return nil, nil
	}
	var flags []string
	for _, d := range caps.Drop {
		if d != "ALL" {
			return nil, fmt.Errorf("capabilities.drop %s: only ALL is expressed here", d)
		}
		for _, c := range defaultCaps {
			flags = append(flags, "--cap-drop", c)
		}
	}
	for _, a := range caps.Add {
		flags = append(flags, "--cap-add", "CAP_"+strings.TrimPrefix(string(a), "CAP_"))
	}
	return flags, nil
}

func mountFlags(pod corev1.PodSpec, c corev1.Container, hostPaths map[string]string) ([]string, error) {
	vols := map[string]corev1.Volume{}
	for _, v := range pod.Volumes {
		vols[v.Name] = v
	}
	var flags []string
	for _, m := range c.VolumeMounts {
		v, ok := vols[m.Name]
		if ok && v.EmptyDir != nil && v.EmptyDir.Medium == "" {
			// An empty directory of the pod (the kubelet's): a tmpfs here.
			flags = append(flags, "--mount", fmt.Sprintf("type=tmpfs,src=tmpfs,dst=%s,options=nosuid:nodev:rw", m.MountPath))
			continue
		}
		var src string
		switch {
		case ok && v.HostPath != nil:
			src = v.HostPath.Path
		case ok && v.Secret != nil:
			// A Secret's files (the serving certificate) come from the
			// directory hostPaths names for "secret:<name>".
			if src, ok = hostPaths["secret:"+v.Secret.SecretName]; !ok {
				return nil, fmt.Errorf("volumeMount %s: Secret %s without a directory (hostPaths[%q])", m.Name, v.Secret.SecretName, "secret:"+v.Secret.SecretName)
			}
		default:
			return nil, fmt.Errorf("volumeMount %s: not a hostPath, Secret or emptyDir volume", m.Name)
		}
		if alt, ok := hostPaths[src]; ok {
			src = alt
		}
		opts := "rbind:rprivate:rw"
		if m.ReadOnly {
			opts = "rbind:rprivate:ro"
		}
		flags = append(flags, "--mount", fmt.Sprintf("type=bind,src=%s,dst=%s,options=%s", src, m.MountPath, opts))
	}
	return flags, nil
}
