package runtime

import (
	"strings"
	"testing"
)

const manifest = "../../deploy/daemonset/base/daemonset.yaml"

// TestFlagsFromManifest: the DaemonSet's context as ctr flags, exactly.
func TestFlagsFromManifest(t *testing.T) {
	ds, err := ReadDaemonSet(manifest)
	if err != nil {
		t.Fatal(err)
	}
	flags, err := Flags(ds, map[string]string{"/var/lib/drainwatch": "/tmp/state", "secret:drainwatch-tls": "/tmp/tls"})
	if err != nil {
		t.Fatal(err)
	}
	drops := ""
	for _, c := range defaultCaps {
		drops += "--cap-drop " + c + " "
	}
	want := "--annotation io.drainwatch.test/run-as-user=0 --read-only --seccomp " + drops + "--cap-add CAP_BPF --cap-add CAP_PERFMON --cap-add CAP_SYS_RESOURCE " +
		"--annotation io.drainwatch.test/host-pid=true " +
		"--mount type=bind,src=/sys/kernel/btf,dst=/sys/kernel/btf,options=rbind:rprivate:ro " +
		"--mount type=bind,src=/sys/fs/cgroup,dst=/sys/fs/cgroup,options=rbind:rprivate:ro " +
		"--mount type=tmpfs,src=tmpfs,dst=/sys/fs/bpf,options=nosuid:nodev:rw " +
		"--mount type=bind,src=/sys/fs/bpf/drainwatch,dst=/sys/fs/bpf/drainwatch,options=rbind:rprivate:rw " +
		"--mount type=bind,src=/tmp/state,dst=/var/lib/drainwatch,options=rbind:rprivate:rw " +
		"--mount type=bind,src=/tmp/tls,dst=/etc/drainwatch/tls,options=rbind:rprivate:ro"
	if got := strings.Join(flags, " "); got != want {
		t.Fatalf("flags\n got %s\nwant %s", got, want)
	}
}
