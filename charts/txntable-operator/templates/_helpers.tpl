{{/* Names, labels and computed lists shared by the templates. */}}

{{- define "txntable.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "txntable.fullname" -}}
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

{{- define "txntable.selectorLabels" -}}
app.kubernetes.io/name: {{ include "txntable.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "txntable.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "txntable.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: txntable
{{- include "txntable.commonLabels" . }}
{{- end }}

{{/* commonLabels as YAML lines (each after a newline); the chart's own label keys are refused. */}}
{{- define "txntable.commonLabels" -}}
{{- $own := list "helm.sh/chart" "app.kubernetes.io/name" "app.kubernetes.io/instance" "app.kubernetes.io/version" "app.kubernetes.io/managed-by" "app.kubernetes.io/part-of" "app.kubernetes.io/component" }}
{{- range $key, $value := .Values.commonLabels }}
{{- if has $key $own }}
{{- fail (printf "commonLabels.%s: the chart sets this label itself (selectors and tooling rely on it); use another key" $key) }}
{{- end }}
{{ $key | quote }}: {{ $value | quote }}
{{- end }}
{{- end }}

{{- define "txntable.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "txntable.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* registry/repository:tag, or @digest when a digest is given; tag defaults to appVersion. */}}
{{- define "txntable.imageRef" -}}
{{- $img := index . 0 }}{{- $chart := index . 1 }}
{{- $repo := $img.repository }}
{{- if $img.registry }}{{- $repo = printf "%s/%s" $img.registry $img.repository }}{{- end }}
{{- if $img.digest }}
{{- printf "%s@%s" $repo $img.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default $chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* Watched namespaces as a JSON list (empty when cluster-wide). */}}
{{- define "txntable.watchNamespaces" -}}
{{- if .Values.watch.clusterWide }}
{{- list | toJson }}
{{- else if .Values.watch.namespaces }}
{{- .Values.watch.namespaces | uniq | toJson }}
{{- else }}
{{- list .Release.Namespace | toJson }}
{{- end }}
{{- end }}

{{/* Namespaces where Spark runs execute, as a JSON list. */}}
{{- define "txntable.sparkNamespaces" -}}
{{- if .Values.spark.namespaces }}
{{- .Values.spark.namespaces | uniq | toJson }}
{{- else }}
{{- include "txntable.watchNamespaces" . }}
{{- end }}
{{- end }}

{{/* Namespaces where a Role grants reading Secrets (JSON list; empty + cluster-wide = ClusterRole). */}}
{{- define "txntable.secretNamespaces" -}}
{{- if .Values.watch.clusterWide }}
{{- .Values.rbac.secrets.namespaces | uniq | toJson }}
{{- else }}
{{- include "txntable.watchNamespaces" . }}
{{- end }}
{{- end }}
