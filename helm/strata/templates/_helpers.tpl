{{/* Names and labels, in the usual Helm shape. */}}
{{- define "strata.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "strata.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "strata.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strata.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The Strata pods only: the demo S3 and the test Pod share the release's labels. */}}
{{- define "strata.serverSelectorLabels" -}}
{{ include "strata.selectorLabels" . }}
app.kubernetes.io/component: server
{{- end -}}

{{- define "strata.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "strata.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: strata
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "strata.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "strata.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "strata.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "strata.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{/* The Secret holding the serving certificate: an existing one, or cert-manager's. */}}
{{- define "strata.tlsSecret" -}}
{{- default (printf "%s-tls" (include "strata.fullname" .)) .Values.tls.existingSecret -}}
{{- end -}}

{{- define "strata.devS3.fullname" -}}
{{- printf "%s-dev-s3" (include "strata.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
strata.toml: the settings the chart owns (where the pod mounts things), then every key of
.Values.config in sorted order. Helm reads numbers from values files as floats, so integers are
printed as integers (TOML would reject 1e+09 for a byte count); maps become inline tables and
lists arrays. Null values are left out (the server's default applies).
*/}}
{{- define "strata.toml" -}}
{{- $config := deepCopy (default dict .Values.config) -}}
{{- if .Values.devS3.enabled -}}
{{- $_ := set $config "tiered_storage_url" (default (printf "s3://%s/strata" .Values.devS3.bucket) (get $config "tiered_storage_url")) -}}
{{- $_ := set $config "tiered_storage_s3_endpoint" (default (printf "http://%s:8333" (include "strata.devS3.fullname" .)) (get $config "tiered_storage_s3_endpoint")) -}}
{{- end -}}
# Written by the Strata Helm chart; change it through the chart's values (config: ...).
listen = {{ printf "0.0.0.0:%d" (int .Values.containerPort) | quote }}
data_dir = "/data"
{{- if .Values.tls.enabled }}
tls_cert_file = "/etc/strata/tls/tls.crt"
tls_key_file = "/etc/strata/tls/tls.key"
{{- if .Values.tls.clientCa }}
tls_client_ca_file = "/etc/strata/tls/ca.crt"
{{- end }}
tls_client_principal = {{ .Values.tls.clientPrincipal | quote }}
{{- end }}
{{- if .Values.auth.keysSecret }}
auth_keys_file = "/etc/strata/auth/keys.json"
{{- end }}
{{- if .Values.archive.signingKeySecret }}
archive_signing_key_file = "/etc/strata/archive/signing.key"
{{- end }}
{{- range $key := keys $config | sortAlpha }}
{{- $value := get $config $key }}
{{- if not (kindIs "invalid" $value) }}
{{ $key }} = {{ include "strata.tomlValue" (dict "key" $key "value" $value) }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "strata.tomlValue" -}}
{{- $v := .value -}}
{{- if kindIs "bool" $v -}}
{{ $v }}
{{- else if kindIs "string" $v -}}
{{ toJson $v }}
{{- else if or (kindIs "float64" $v) (kindIs "int64" $v) (kindIs "int" $v) -}}
{{- if eq .key "access_log_sample_rate" -}}{{ printf "%f" (float64 $v) }}{{- else -}}{{ int64 $v }}{{- end -}}
{{- else if kindIs "slice" $v -}}
[{{ range $i, $e := $v }}{{ if $i }}, {{ end }}{{ include "strata.tomlValue" (dict "key" "" "value" $e) }}{{ end }}]
{{- else if kindIs "map" $v -}}
{ {{- range $i, $k := keys $v | sortAlpha }}{{ if $i }},{{ end }} {{ toJson $k }} = {{ include "strata.tomlValue" (dict "key" $k "value" (get $v $k)) }}{{ end }} }
{{- else -}}
{{ fail (printf "config.%s: cannot write a %s to TOML" .key (kindOf $v)) }}
{{- end -}}
{{- end -}}

{{/* Fails the render on combinations the schema cannot express, with a message that says why. */}}
{{- define "strata.validate" -}}
{{- $config := default dict .Values.config -}}
{{- if and .Values.metrics.serviceMonitor.enabled (eq (toString (get $config "metrics_enabled")) "false") -}}
{{- fail "metrics.serviceMonitor.enabled needs config.metrics_enabled (it is false: /metrics answers 404)" -}}
{{- end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) (not .Values.tls.certManager.enabled) -}}
{{- fail "tls.enabled needs tls.existingSecret or tls.certManager.enabled (where else would the certificate come from?)" -}}
{{- end -}}
{{- if and .Values.tls.certManager.enabled (not .Values.tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.enabled needs tls.certManager.issuerRef.name" -}}
{{- end -}}
{{- if and .Values.tls.clientCa (not .Values.tls.enabled) -}}
{{- fail "tls.clientCa needs tls.enabled (client certificates arrive in the TLS handshake)" -}}
{{- end -}}
{{- if and .Values.devS3.enabled .Values.s3.existingSecret -}}
{{- fail "devS3.enabled brings its own demo credentials: leave s3.existingSecret empty" -}}
{{- end -}}
{{- end -}}
