//go:build tools

// Package argobuild pins the Argo Rollouts controller that `make argo`
// builds into .cache/ for the progressive-delivery gate's end-to-end test
// (testenv/e2e TestArgoGate*), and the CRDs it serves (copied from the
// module's manifests/crds). A module of its own, so the project's go.mod
// does not grow Argo's dependencies.
package argobuild

import _ "github.com/argoproj/argo-rollouts/cmd/rollouts-controller"
