//go:build tools

// Package helmbuild pins the Helm CLI that testenv/scripts/build-helm.sh
// builds into .cache/ for the chart's tests. A module of its own, so the
// project's go.mod does not grow Helm's dependencies.
package helmbuild

import _ "helm.sh/helm/v3/cmd/helm"
