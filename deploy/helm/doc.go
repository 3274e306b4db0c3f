// Package helm holds drainwatch's Helm chart (drainwatch/) and its tests:
// helm lint, helm template for the default and the full values, the default
// rendering checked equal to the kustomize base, and a server-side dry-run
// of both renderings against testenv's real API server. Helm is the CLI
// built from its Go module into .cache/ (make helm).
package helm
