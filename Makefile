# drainwatch — build, test and lab entry points. Every target that needs the
# machine prepared (packages, tracefs/bpffs mounts, the control plane) depends
# on the target that prepares it, so `sudo make test` and `sudo make lab` work
# on a fresh machine.

GO          ?= go
K8S_VERSION := v1.37.2
CACHE       := $(CURDIR)/.cache
K8S_BIN     := $(CACHE)/k8s-$(K8S_VERSION)/bin
# The releases make k8s-versions tests (testenv/k8sbuild/releases/ pins
# the others); the oldest is the oldest k8s.io/kubernetes the module proxy
# serves here.
K8S_VERSIONS ?= v1.34.4 v1.36.3 $(K8S_VERSION)
BIN         := $(CURDIR)/bin
VERSION     ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -X github.com/drainwatch/drainwatch/exporter.Version=$(VERSION)
TEST_TIMEOUT ?= 40m

VM_KERNELS  := $(CACHE)/vmkernel
ARM64_KERNEL_DIR := $(CACHE)/vmkernel/arm64

# Test tools built once from Go modules of their own (testenv/helmbuild,
# testenv/opconfig); testenv/gotools finds them at these paths.
HELM_VERSION     := v3.22.0
OPERATOR_VERSION := v0.85.0
HELM             := $(CACHE)/helm-$(HELM_VERSION)/helm
OTELCOL_VERSION  := v0.161.0
OTELCOL          := $(CACHE)/otelcol-$(OTELCOL_VERSION)/otelcol
OPCONFIG_DIR     := $(CACHE)/opconfig-$(OPERATOR_VERSION)
PROM_SD_VERSION  := v0.305.0
# The Argo Rollouts controller the gate's e2e test runs (testenv/argobuild
# pins it; testenv/gotools.ArgoVersion must match).
ARGO_VERSION     := v1.8.5
ARGO_DIR         := $(CACHE)/argo-rollouts-$(ARGO_VERSION)
# Flagger's CRDs, for the server-side dry run of the chart's MetricTemplates
# (the module's artifacts/flagger/crd.yaml; testenv/gotools.FlaggerVersion).
FLAGGER_VERSION  := v1.36.1
FLAGGER_DIR      := $(CACHE)/flagger-$(FLAGGER_VERSION)
K8SSD            := $(CACHE)/k8ssd-$(PROM_SD_VERSION)/k8ssd
# govulncheck and the vulnerability database it reads offline, both pinned in
# testenv/vulndb/go.mod (these versions must match it).
VULN_VERSION     := v1.9.0
VULNDB_VERSION   := v0.0.0-20261105234957-e22db6528018
GOVULNCHECK      := $(CACHE)/govulncheck-$(VULN_VERSION)/govulncheck
VULNDB_DIR       := $(CACHE)/vulndb-$(VULNDB_VERSION)

export DRAINWATCH_K8S_BIN := $(K8S_BIN)
# go.mod's toolchain line names the Go release whose standard library has no
# known vulnerability the code calls (make vulncheck); auto lets every go
# command here switch to it, fetched once from the module proxy, where the
# machine's go.env says local.
export GOTOOLCHAIN ?= auto

.PHONY: help deps mounts generate vmlinux vmlinux-arm64 check-generate cross cross-daemon build controlplane realnode otelcol \
        vmkernel support-matrix k8s-versions docs helm opconfig argo vulncheck check-tidy test test-unit vet lab clean image release-version screenshots bench scale fuzz fuzz-short fuzz-targets soak

help: ## Show this help.
	@awk 'BEGIN{FS=":.*## "} /^[a-z-]+:.*## /{printf "  %-16s %s\n",$$1,$$2}' $(MAKEFILE_LIST)

deps: ## Install the Debian packages a fresh machine lacks (clang, bpftool, nginx, prometheus, nftables, ...).
	@bash testenv/scripts/install-deps.sh

mounts: ## Mount tracefs and bpffs if they are not mounted.
	@bash testenv/scripts/mounts.sh

vmlinux: ## Regenerate bpf/vmlinux/vmlinux_amd64.h from this machine's BTF (rarely needed).
	bpftool btf dump file /sys/kernel/btf/vmlinux format c > bpf/vmlinux/vmlinux_amd64.h

vmlinux-arm64: ## Regenerate bpf/vmlinux/vmlinux_arm64.h from Debian's arm64 cloud kernel's BTF (rarely needed).
	@GO=$(GO) bash tools/scripts/vmlinux-arm64.sh $(ARM64_KERNEL_DIR) bpf/vmlinux/vmlinux_arm64.h

generate: ## Regenerate the eBPF objects and Go bindings with Debian's clang (committed output).
	$(GO) generate ./collector/... ./deploy/...

check-generate: generate ## Fail when regenerating changes committed output.
	@git diff --exit-code --stat -- collector bpf deploy || \
	  { echo "generated output differs from the committed one: run make generate and commit"; exit 1; }

build: ## Build bin/drainwatch and bin/drainwatch-apiserver.
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/drainwatch ./cmd/drainwatch
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/drainwatch-apiserver ./cmd/drainwatch-apiserver

# make test builds the daemon for arm64, not drainwatch-apiserver: that one is
# pure Go (no eBPF object, no cgo), and compiling k8s.io/apiserver's tree a
# second time, for arm64, cost CI minutes on a fresh machine for no check the
# amd64 build does not make (make image and make cross still build it).
cross-daemon:
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -o /dev/null ./cmd/drainwatch
	GOOS=linux GOARCH=arm64 $(GO) test -c -o /dev/null ./collector/kernel

cross: cross-daemon ## Build drainwatch and drainwatch-apiserver and compile the kernel collector's tests for arm64 (its eBPF objects and loaders link).
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -trimpath -o /dev/null ./cmd/drainwatch-apiserver

IMAGE_ARCHES ?= amd64 arm64

image: ## Build the OCI image (bin/drainwatch-oci/, .tar, per-arch tarballs) without a container engine.
	@GO=$(GO) bash tools/scripts/image.sh $(BIN) $(VERSION) $(IMAGE_ARCHES)

release-version: ## Set the image tag a release installs (chart appVersion and version, kustomize newTag): make release-version VERSION=vX.Y.Z.
	@bash tools/scripts/set-version.sh $(VERSION)

controlplane: ## Build (once, cached in .cache/) etcd, the Kubernetes control plane and kube-proxy from k8s.io/kubernetes.
	@bash testenv/scripts/build-controlplane.sh $(K8S_VERSION) $(K8S_BIN)

realnode: ## Build (once, cached in .cache/) the kubelet from k8s.io/kubernetes for testenv/realnode (Debian's containerd, runc, CNI).
	@bash testenv/scripts/build-controlplane.sh $(K8S_VERSION) $(K8S_BIN) kubelet

helm: ## Build (once, cached in .cache/) the Helm CLI from helm.sh/helm/v3 for the chart's tests.
	@bash testenv/scripts/build-gotool.sh testenv/helmbuild helm.sh/helm/v3/cmd/helm $(HELM) \
	  "-X helm.sh/helm/v3/internal/version.version=$(HELM_VERSION)"

otelcol: ## Build (once, cached in .cache/) a minimal OpenTelemetry Collector (OTLP receiver, contrib file exporter) from testenv/otelcolbuild for the OTLP tests.
	@bash testenv/scripts/build-gotool.sh testenv/otelcolbuild . $(OTELCOL)

opconfig: ## Build (once, cached) the Prometheus Operator's config generator and Prometheus' Kubernetes discovery (testenv/k8ssd); copy the operator's CRDs.
	@bash testenv/scripts/build-gotool.sh testenv/opconfig . $(OPCONFIG_DIR)/opconfig
	@mkdir -p $(OPCONFIG_DIR)/crds
	@bash testenv/scripts/build-gotool.sh testenv/k8ssd . $(K8SSD)
	@cp -f "$$(cd testenv/opconfig && $(GO) list -m -f '{{.Dir}}' github.com/prometheus-operator/prometheus-operator)"/example/prometheus-operator-crd/*.yaml $(OPCONFIG_DIR)/crds/

# Measured on the shared 2-core machine (2026-12-02): 15.5 min with an empty
# GOCACHE at a load of 13 (the control plane building beside it): 473 s of
# user and 86 s of system CPU, so about 5 min on two idle cores; once per
# build cache.
argo: ## Build (once, cached) the Argo Rollouts controller from github.com/argoproj/argo-rollouts (testenv/argobuild); copy its CRDs and Flagger's.
	@bash testenv/scripts/build-gotool.sh testenv/argobuild github.com/argoproj/argo-rollouts/cmd/rollouts-controller $(ARGO_DIR)/rollouts-controller \
	  "-X github.com/argoproj/argo-rollouts/utils/version.version=$(ARGO_VERSION:v%=%)"
	@mkdir -p $(ARGO_DIR)/crds
	@cp -f "$$(cd testenv/argobuild && $(GO) list -m -f '{{.Dir}}' github.com/argoproj/argo-rollouts)"/manifests/crds/*-crd.yaml $(ARGO_DIR)/crds/
	@mkdir -p $(FLAGGER_DIR)
	@cp -f "$$($(GO) mod download -json github.com/fluxcd/flagger@$(FLAGGER_VERSION) | sed -n 's/^\t"Dir": "\(.*\)",$$/\1/p')"/artifacts/flagger/crd.yaml $(FLAGGER_DIR)/crd.yaml

# vulncheck fails when the code calls a symbol with a known vulnerability
# (govulncheck's default mode: imported but uncalled ones are only listed).
# The database is golang.org/x/vulndb's OSV entries as of VULNDB_VERSION:
# move it forward in testenv/vulndb and here to see newer entries.
vulncheck: ## Report known vulnerabilities the code calls (govulncheck, offline: golang.org/x/vulndb's database, built once into .cache/).
	@bash testenv/scripts/build-gotool.sh testenv/vulndb golang.org/x/vuln/cmd/govulncheck $(GOVULNCHECK)
	@bash testenv/scripts/build-gotool.sh testenv/vulndb golang.org/x/vulndb/cmd/indexdb $(VULNDB_DIR)/indexdb
	@bash testenv/scripts/build-vulndb.sh testenv/vulndb $(VULNDB_VERSION) $(VULNDB_DIR)/indexdb $(VULNDB_DIR)/db
	$(GOVULNCHECK) -db file://$(VULNDB_DIR)/db ./...

check-tidy: ## Fail when go mod tidy would change go.mod or go.sum (the project's and testenv's tool modules).
	@for dir in . testenv/k8sbuild testenv/helmbuild testenv/opconfig testenv/k8ssd testenv/vulndb testenv/argobuild testenv/otelcolbuild; do \
	  (cd $$dir && $(GO) mod tidy -diff) || { echo "$$dir: go.mod/go.sum are not tidy: run go mod tidy there and commit"; exit 1; }; \
	done

support-matrix: deps mounts vmkernel ## Run the kernel matrix and regenerate docs/support-matrix.{txt,md} and docs/support.md's table from it (make test fails when they differ).
	rm -f $(CACHE)/matrix.txt
	DRAINWATCH_VM_KERNELS=$(VM_KERNELS) DRAINWATCH_MATRIX_OUT=$(CACHE)/matrix.txt DRAINWATCH_MATRIX_REGENERATE=1 \
	  $(GO) test -count=1 -run '^TestVMMatrix$$' ./collector/kernel/
	cp $(CACHE)/matrix.txt docs/support-matrix.txt
	$(GO) run ./tools/supportmatrix -in docs/support-matrix.txt -doc docs/support-matrix.md -readme docs/support.md

docs: ## Rewrite the generated reference pages from the code: metrics (docs/metrics.md), flags (docs/cli.md), chart values (docs/install.md).
	$(GO) run ./tools/docgen
	DRAINWATCH_WRITE_DOCS=1 $(GO) test -count=1 -run '^TestCLIReference$$' ./cmd/drainwatch

k8s-versions: deps mounts helm opconfig argo otelcol ## Build Kubernetes K8S_VERSIONS (default v1.34.4 v1.36.3 and the pinned one) and run a subset of the tests on each; writes docs/kubernetes-matrix.txt and docs/support.md's table (root, not in make test; about 15 min per release the first time, 8 after).
	@bash testenv/scripts/k8s-versions.sh $(CACHE) $(K8S_VERSIONS)

vmkernel: ## Fetch Debian's cloud kernels (once: 5.10, 6.1, 6.12 amd64; 6.1 arm64) for the kernel matrix under qemu.
	@bash testenv/scripts/vm-kernel.sh $(VM_KERNELS) >/dev/null

vet:
	$(GO) vet ./...

test-unit: otelcol ## Unit tests only (no root needed).
	$(GO) test -count=1 -short ./...

test: deps mounts controlplane realnode helm opconfig argo otelcol vmkernel check-tidy check-generate vet vulncheck cross-daemon ## Everything: unit, privileged (root), end to end, a short fuzz run.
	@date -u +'>> make test: set-up and checks done %T UTC; go test ./... (about 35 min)'
	DRAINWATCH_VM_KERNELS=$(VM_KERNELS) $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./...
	@date -u +'>> make test: go test done %T UTC; fuzz-short'
	$(MAKE) --no-print-directory fuzz-short

# Fuzz targets (package:function). `make test` runs their seed corpora
# (f.Add and testdata/fuzz/) as ordinary tests, then explores the collector's
# targets for FUZZTIME_SHORT each (fuzz-short); `make fuzz` explores every
# target for FUZZTIME. fuzz-short leaves out exporter's and daemon's targets:
# their instrumented builds take client-go's and k8s.io/apiserver's trees
# (700 and 980 packages against the collector's 130-250), which on a fresh
# machine cost 5-10 min of CI (measured on the shared 2-core machine,
# 2026-12-01: 56 s warm, 5 min with an empty GOCACHE at a load of 4-8, 10 min
# at 14) and pushed make test past CI's 90 (2026-12-04). Their seeds still
# run in make test. testenv/scripts/fuzz.sh says how a run tells a failing
# input from Go's own -fuzztime race.
FUZZTIME ?= 60s
FUZZTIME_SHORT ?= 3s
FUZZ_TARGETS_SHORT := ./collector:FuzzPrintable ./collector/kernel:FuzzDecode \
  ./collector/node:FuzzParseContainerCgroup ./collector/node:FuzzParseProcCgroup ./collector/node:FuzzParseCgroup2Mount
FUZZ_TARGETS := $(FUZZ_TARGETS_SHORT) \
  ./exporter:FuzzParseFilter ./exporter:FuzzAPIQuery ./exporter:FuzzOwnerIntoMetrics \
  ./daemon:FuzzStateFile ./daemon:FuzzCheckpointDecoding ./daemon:FuzzRestoredState

fuzz: fuzz-targets ## Fuzz every target for FUZZTIME each (default 60s); failing inputs land in the package's testdata/fuzz/.
	@bash testenv/scripts/fuzz.sh $(GO) $(FUZZTIME) $(FUZZ_TARGETS)

fuzz-short: fuzz-targets ## Fuzz the collector's targets for FUZZTIME_SHORT each (default 3s): what make test runs.
	@bash testenv/scripts/fuzz.sh $(GO) $(FUZZTIME_SHORT) $(FUZZ_TARGETS_SHORT)

# fuzz-targets fails when FUZZ_TARGETS is not the tree's Fuzz functions: a
# new one left out of the list would never be fuzzed.
fuzz-targets:
	@found="$$(git grep -oE '^func Fuzz[A-Za-z0-9_]+' -- '*_test.go' | sed -E 's|^(.*)/[^/]*:func (Fuzz.*)|./\1:\2|' | sort)"; \
	listed="$$(printf '%s\n' $(FUZZ_TARGETS) | sort)"; \
	[ "$$found" = "$$listed" ] || { printf 'FUZZ_TARGETS lists:\n%s\nthe tree has:\n%s\n' "$$listed" "$$found"; exit 1; }

lab: deps mounts controlplane realnode helm opconfig otelcol build ## The seeds' experiment and a rolling update, end to end, on stand-in nodes and a real node (root).
	$(GO) run ./testenv/cmd/lab

SHOTS_DIR := $(CACHE)/screenshots-run

screenshots: deps mounts controlplane helm opconfig otelcol build ## Refresh docs/images from the lab: the seeds' naive termination on /ui as headless Chromium renders it (root, about 3 minutes).
	rm -rf $(SHOTS_DIR)
	$(GO) run ./testenv/cmd/lab --scenario seeds/naive --real-node=false --out $(SHOTS_DIR)
	cp $(SHOTS_DIR)/screenshots/seeds_naive-lab-1.png docs/images/timeline-seeds-naive.png

SCALE_FLAGS ?=

scale: controlplane ## What drainwatch's kube side costs the API server: 200 hollow nodes, a 2,000-pod rollout, scoped vs naive (not in make test; SCALE_FLAGS="--nodes 20 --pods 200").
	$(GO) run ./testenv/cmd/scale $(SCALE_FLAGS)

SOAK_DURATION ?= 1h
SOAK_FLAGS    ?=

soak: deps mounts controlplane build ## An hour of churn on one node (not in make test; root): 50 pods, a rollout a minute, every termination exact, RSS/goroutines/fds/bbolt/maps sampled (SOAK_DURATION=5m).
	$(GO) run ./testenv/cmd/soak --duration $(SOAK_DURATION) --drainwatch $(BIN)/drainwatch $(SOAK_FLAGS)

clean:
	rm -rf $(BIN)

BENCH_FLAGS ?=
# The Go benchmarks make bench runs: the per-event micro benchmarks (timed),
# then the kernel's own accounting of the probes and the reader's ceiling
# (one run each). BenchmarkLoopbackChurnRatio (~2 min) is left out: the
# nginx+wrk run measures the same thing as deployed.
BENCH_MICRO := Decode|ReaderSteadyState|Kernel$$|Snapshot|CountKernelEvent
BENCH_ONCE  := ProbeRuntime|ReaderCeiling

bench: deps mounts controlplane ## What drainwatch costs (not part of test; root, ~10 min): Go benchmarks, the reader's ceiling, nginx+wrk overhead, RSS.
	$(GO) test -run '^$$' -bench '$(BENCH_MICRO)' -benchmem -count 1 ./collector/kernel/ ./correlate/ ./exporter/
	$(GO) test -run '^$$' -bench '$(BENCH_ONCE)' -benchtime 1x -count 1 -v ./collector/kernel/
	$(GO) run ./testenv/cmd/bench $(BENCH_FLAGS)
