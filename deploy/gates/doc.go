// Package gates holds the progressive-delivery gates on drainwatch's
// per-revision counters: an Argo Rollouts AnalysisTemplate
// (argo-analysistemplate.yaml) and Flagger MetricTemplates
// (flagger-metrictemplates.yaml), copied into the Helm chart's files. Its
// Go test runs their queries, with the arguments the controllers pass,
// against the real Prometheus scraping drainwatch's exporter; testenv/e2e
// TestArgoGate runs the AnalysisTemplate in the real Argo Rollouts
// controller.
package gates

//go:generate cp argo-analysistemplate.yaml ../helm/drainwatch/files/argo-analysistemplate.yaml
//go:generate cp flagger-metrictemplates.yaml ../helm/drainwatch/files/flagger-metrictemplates.yaml
