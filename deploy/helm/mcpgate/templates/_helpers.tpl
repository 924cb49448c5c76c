{{/* The release's resource names: at most 63 characters (a DNS label). */}}
{{- define "mcpgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcpgate.fullname" -}}
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

{{- define "mcpgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "mcpgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcpgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcpgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcpgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding MCPGATE_TASK_KEY and MCPGATE_REDIS_URL, and its keys. */}}
{{- define "mcpgate.secretName" -}}
{{- default (include "mcpgate.fullname" .) .Values.existingSecret }}
{{- end }}
{{- define "mcpgate.taskKeyKey" -}}
{{- if .Values.existingSecret }}{{ .Values.existingSecretKeys.taskKey }}{{ else }}task-key{{ end }}
{{- end }}
{{- define "mcpgate.redisURLKey" -}}
{{- if .Values.existingSecret }}{{ .Values.existingSecretKeys.redisURL }}{{ else }}redis-url{{ end }}
{{- end }}

{{/*
mcpgate.terminationGrace: terminationGracePeriodSeconds, longer than drain_delay +
shutdown_timeout, else Kubernetes kills the pod mid-drain.
*/}}
{{- define "mcpgate.terminationGrace" -}}
{{- $drain := add (int .Values.drain.delaySeconds) (int .Values.drain.shutdownTimeoutSeconds) }}
{{- /* index, not .Values.x: Helm drops a null value's key, and the strict engine refuses a missing one. */}}
{{- $grace := index .Values "terminationGracePeriodSeconds" }}
{{- if kindIs "invalid" $grace }}
{{- add $drain 10 }}
{{- else if le (int $grace) $drain }}
{{- fail (printf "terminationGracePeriodSeconds: %d is not longer than the drain, drain.delaySeconds + drain.shutdownTimeoutSeconds = %d s: Kubernetes would kill the pod before calls in flight finish" (int $grace) $drain) }}
{{- else }}
{{- int $grace }}
{{- end }}
{{- end }}

{{/*
mcpgate.config: the user's config with the keys the chart manages added. A key
the chart manages that the user's config sets too is refused, naming the value
to set instead: two places for one setting would leave one silently ignored.
*/}}
{{- define "mcpgate.config" -}}
{{- $cfg := deepCopy (.Values.config | default dict) }}
{{- $managed := dict "listen" "the container listens on 0.0.0.0:8080 (--addr); use service.port for the Service's port" "log_format" "logFormat" "drain_delay" "drain.delaySeconds" "shutdown_timeout" "drain.shutdownTimeoutSeconds" "state" "state.backend and state.redis" "stateful" "stateful" }}
{{- range $key, $instead := $managed }}
{{- if hasKey $cfg $key }}
{{- fail (printf "config.%s: set by the chart: set %s instead" $key $instead) }}
{{- end }}
{{- end }}
{{- $tasks := get $cfg "tasks" | default dict }}
{{- if hasKey $tasks "key_env" }}
{{- fail "config.tasks.key_env: set by the chart (MCPGATE_TASK_KEY from the Secret): set secret.taskKey or existingSecret instead" }}
{{- end }}
{{- $_ := set $tasks "key_env" "MCPGATE_TASK_KEY" }}
{{- $_ = set $cfg "tasks" $tasks }}
{{- $_ = set $cfg "log_format" .Values.logFormat }}
{{- $_ = set $cfg "drain_delay" (printf "%ds" (int .Values.drain.delaySeconds)) }}
{{- $_ = set $cfg "shutdown_timeout" (printf "%ds" (int .Values.drain.shutdownTimeoutSeconds)) }}
{{- if eq .Values.state.backend "redis" }}
{{- /* The URL comes from MCPGATE_REDIS_URL (the Secret), never the ConfigMap. */}}
{{- $_ = set $cfg "state" (dict "backend" "redis" "redis" (dict "key_prefix" .Values.state.redis.keyPrefix)) }}
{{- else }}
{{- $_ = set $cfg "state" (dict "backend" "memory") }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}
