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
{{- if or .Values.tls.secretName .Values.tls.selfSigned -}}, scheme: HTTPS{{- end -}}
{{- end -}}

{{/* The pin directory, the only part of the host's bpffs the pod mounts. */}}
{{- define "drainwatch.pinPath" -}}
{{- $p := default "/sys/fs/bpf/drainwatch" .Values.pinPath -}}
{{- if not (hasPrefix "/sys/fs/bpf/" $p) -}}
{{- fail (printf "pinPath %q: must be a directory under /sys/fs/bpf/ (the host's bpffs)" $p) -}}
{{- end -}}
{{- $p -}}
{{- end -}}
