#!/usr/bin/env bash
# make k8s-versions: build the control plane, kube-proxy and the kubelet of
# each Kubernetes release given (testenv/k8sbuild, or
# testenv/k8sbuild/releases/<version>) and run a subset of the tests on
# each: the control plane itself, the chart's server-side dry run and gates,
# the apply-time warning and the rollout gate's policy, and end to end the
# seeds on stand-in nodes and behind the real kube-proxy, the new pods'
# side, the aggregated API, and the rolling update on the real kubelet.
# The results go to docs/kubernetes-matrix.txt and the table of
# docs/support.md (tools/k8smatrix). Root, like make test.
#   bash testenv/scripts/k8s-versions.sh <cache dir> v1.34.4 v1.36.3 v1.37.2
set -uo pipefail
cache=$1
shift
versions=("$@")
cd "$(dirname "$0")/../.."
out=$cache/k8s-matrix
mkdir -p "$out"
# package and the tests of it to run (go test -run).
subset=(
  "./testenv/controlplane" '^(TestServerVersion|TestDeploymentRollout|TestRestartAPIServer)$'
  "./deploy/helm" '^(TestServerSideDryRun|TestGatesServerSideDryRun)$'
  "./testenv/apitest" '^(TestAdmissionPolicyWarns|TestRolloutJSONPatchAndPolicy)$'
  "./testenv/e2e" '^(TestSeedsDirect|TestSeedsKubeProxy|TestStartups|TestAggregatedAPI|TestRealNodeRollout)$'
)
start=$(date +%s)
for v in "${versions[@]}"; do
  bin=$cache/k8s-$v/bin
  echo ">> Kubernetes $v: building (once, cached in $bin)"
  bash testenv/scripts/build-controlplane.sh "$v" "$bin" || { echo "building $v failed" >&2; exit 1; }
  bash testenv/scripts/build-controlplane.sh "$v" "$bin" kubelet || { echo "building the kubelet $v failed" >&2; exit 1; }
  : >"$out/$v.json"
  for ((i = 0; i < ${#subset[@]}; i += 2)); do
    pkg=${subset[i]} run=${subset[i+1]}
    echo ">> Kubernetes $v: $pkg $run"
    DRAINWATCH_K8S_BIN=$bin DRAINWATCH_K8S_VERSION=$v \
      go test -count=1 -p 1 -timeout 30m -json -run "$run" "$pkg" >>"$out/$v.json" 2>&1
    grep -o '"Action":"\(pass\|fail\|skip\)","Package":"[^"]*","Test":"Test[A-Za-z0-9]*","Elapsed":[0-9.]*' "$out/$v.json" |
      sed 's/"Action":"\([a-z]*\)","Package":"[^"]*","Test":"\([A-Za-z0-9]*\)","Elapsed":\([0-9.]*\)/   \1 \2 (\3 s)/' |
      grep -F -f <(echo "$run" | tr -d '^$()' | tr '|' '\n') | sort -u
  done
done
go run ./tools/k8smatrix -in "$out" -versions "${versions[*]}" -txt docs/kubernetes-matrix.txt -doc docs/support.md || exit 1
echo ">> $(grep -c . docs/kubernetes-matrix.txt) results in docs/kubernetes-matrix.txt and docs/support.md's table ($(( ($(date +%s) - start) / 60 )) min); the runs' output: $out/<version>.json"
grep -v 'result=pass' docs/kubernetes-matrix.txt || echo ">> every test passed on every release"
