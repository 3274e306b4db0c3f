package runtime

import (
	"os"
	"path/filepath"
)

const (
	hostPIDAnnotation   = "io.drainwatch.test/host-pid"
	runAsUserAnnotation = "io.drainwatch.test/run-as-user"
)

// hostPIDWrapper is a runc that first removes the pid namespace from a
// bundle annotated for hostPID: the spec the CRI gives a hostPID pod
// (oci.WithHostNamespace(pid)), which ctr 1.6 cannot express; and sets the
// process's uid (and gid) from the runAsUser annotation, which ctr 1.6
// cannot either (no --user).
const hostPIDWrapper = `#!/bin/sh
prev=
for a; do
  case $prev in --bundle|-b) bundle=$a ;; esac
  prev=$a
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  python3 - "$bundle/config.json" <<'PY' || exit 1
import json, sys
p = sys.argv[1]
s = json.load(open(p))
if s.get("annotations", {}).get("` + hostPIDAnnotation + `") == "true":
    s["linux"]["namespaces"] = [n for n in s["linux"]["namespaces"] if n["type"] != "pid"]
uid = s.get("annotations", {}).get("` + runAsUserAnnotation + `")
if uid is not None:
    s["process"]["user"] = {"uid": int(uid), "gid": int(uid)}
json.dump(s, open(p, "w"))
PY
fi
exec runc "$@"
`

// WriteHostPIDWrapper writes the wrapper under dir; pass it to ctr run as
// --runc-binary.
func WriteHostPIDWrapper(dir string) (string, error) {
	p := filepath.Join(dir, "runc-hostpid")
	return p, os.WriteFile(p, []byte(hostPIDWrapper), 0o755)
}
