{{/* The chart name, overridable with nameOverride. */}}
{{- define "apiserver.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The fully qualified app name: the release name, plus the chart name unless it already contains it. */}}
{{- define "apiserver.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "apiserver.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "apiserver.selectorLabels" -}}
app.kubernetes.io/name: {{ include "apiserver.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "apiserver.labels" -}}
helm.sh/chart: {{ include "apiserver.chart" . }}
{{ include "apiserver.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "apiserver.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The Secret with the PKI and token file. */}}
{{- define "apiserver.pkiSecret" -}}
{{- default (printf "%s-pki" (include "apiserver.fullname" .)) .Values.pki.existingSecret }}
{{- end }}

{{/* The server's command-line arguments (the image's entrypoint adds --secure-listen). */}}
{{- define "apiserver.args" -}}
{{- $servers := required "etcd.servers must list the etcd client URLs" .Values.etcd.servers -}}
- {{ printf "--etcd-servers=%s" (join "," $servers) | quote }}
- {{ printf "--etcd-prefix=%s" .Values.etcd.prefix | quote }}
{{- with .Values.etcd.overrides }}
{{- $entries := list }}
{{- range . }}
{{- $servers := required "etcd.overrides: every entry needs servers" .servers }}
{{- $entries = append $entries (printf "%s#%s" (required "etcd.overrides: every entry needs a resource (group/resource)" .resource) (join ";" $servers)) }}
{{- end }}
- {{ printf "--etcd-servers-overrides=%s" (join "," $entries) | quote }}
{{- end }}
- {{ printf "--watch-cache=%t" .Values.server.watchCache | quote }}
- {{ printf "--request-timeout=%ds" (int .Values.server.requestTimeoutSeconds) | quote }}
- {{ printf "--max-requests-inflight=%d" (int .Values.server.maxRequestsInflight) | quote }}
- {{ printf "--max-mutating-requests-inflight=%d" (int .Values.server.maxMutatingRequestsInflight) | quote }}
- {{ printf "--shutdown-delay-duration=%ds" (int .Values.shutdownDelaySeconds) | quote }}
- {{ printf "--anonymous-auth=%t" .Values.anonymousAuth | quote }}
- "--tls-cert-file=/etc/apiserver/pki/tls.crt"
- "--tls-private-key-file=/etc/apiserver/pki/tls.key"
- "--client-ca-file=/etc/apiserver/pki/ca.crt"
- "--service-account-signing-key-file=/etc/apiserver/pki/sa.key"
- "--token-auth-file=/etc/apiserver/pki/tokens.csv"
{{- range .Values.server.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
