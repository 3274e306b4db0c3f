{{/* The release's objects are named after the release unless it already contains the chart's name. */}}
{{- define "drainwatch.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The kustomize base's labels, on every object. */}}
{{- define "drainwatch.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/part-of: drainwatch
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Pods are selected by name only: `drainwatch timeline` finds them with app.kubernetes.io/name=drainwatch. */}}
{{- define "drainwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
{{- end -}}

{{- define "drainwatch.serviceAccountName" -}}
{{- default (include "drainwatch.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "drainwatch.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{/* The probes' scheme: HTTPS when the daemon serves TLS (the kubelet does not verify the certificate). */}}
{{- define "drainwatch.probeScheme" -}}
{{- if include "drainwatch.tlsEnabled" . -}}, scheme: HTTPS{{- end -}}
{{- end -}}

{{/* The Secret the daemons' serving certificate is mounted from: tls.secretName, else the chart's own (cert-manager's Certificate or the generated one); empty with tls.selfSigned or without TLS. */}}
{{- define "drainwatch.tlsSecretName" -}}
{{- if .Values.tls.secretName -}}
{{ .Values.tls.secretName }}
{{- else if or .Values.tls.certManager.enabled .Values.tls.generate -}}
{{ include "drainwatch.fullname" . }}-tls
{{- end -}}
{{- end -}}

{{/* The name in the serving certificate that scrapers and clients verify: the metrics Service's. */}}
{{- define "drainwatch.tlsServerName" -}}
{{ include "drainwatch.fullname" . }}-metrics.{{ .Release.Namespace }}.svc
{{- end -}}

{{/* Whether the daemons serve HTTPS. */}}
{{- define "drainwatch.tlsEnabled" -}}
{{- if or (include "drainwatch.tlsSecretName" .) .Values.tls.selfSigned -}}true{{- end -}}
{{- end -}}

{{/* The PodMonitor's default tlsConfig: the CA in the serving certificate's Secret (ca.crt, as cert-manager and the generated Secret hold it) and the name the certificate carries; a self-signed daemon allows no verification. */}}
{{- define "drainwatch.scrapeTLSConfig" -}}
{{- with include "drainwatch.tlsSecretName" . -}}
ca:
  secret: {name: {{ . }}, key: ca.crt}
serverName: {{ include "drainwatch.tlsServerName" $ }}
{{- else -}}
insecureSkipVerify: true
{{- end -}}
{{- end -}}

{{/* The pin directory, the only part of the host's bpffs the pod mounts. */}}
{{- define "drainwatch.pinPath" -}}
{{- $p := default "/sys/fs/bpf/drainwatch" .Values.pinPath -}}
{{- if not (hasPrefix "/sys/fs/bpf/" $p) -}}
{{- fail (printf "pinPath %q: must be a directory under /sys/fs/bpf/ (the host's bpffs)" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}
