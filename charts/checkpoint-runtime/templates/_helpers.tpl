{{- define "checkpoint-runtime.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}



{{/*
Labels. Selectors use name and instance only (they are immutable on a Deployment); every
object carries the full recommended set plus helm.sh/chart. Call with (list $ "component").
*/}}
{{- define "checkpoint-runtime.selectorLabels" -}}
app.kubernetes.io/name: {{ include "checkpoint-runtime.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{- define "checkpoint-runtime.componentLabels" -}}
{{- $root := index . 0 -}}
helm.sh/chart: {{ include "checkpoint-runtime.chart" $root | quote }}
{{ include "checkpoint-runtime.selectorLabels" $root }}
app.kubernetes.io/version: {{ $root.Values.image.tag | quote }}
app.kubernetes.io/component: {{ index . 1 }}
app.kubernetes.io/part-of: checkpoint-runtime
app.kubernetes.io/managed-by: {{ $root.Release.Service }}
{{- end }}

{{/*
The helm test pod's labels: its own app.kubernetes.io/name, so that the Service, the
PodDisruptionBudget and the NetworkPolicy (which select name and instance) never count it.
*/}}
{{- define "checkpoint-runtime.testSelectorLabels" -}}
app.kubernetes.io/name: {{ printf "%s-test" (include "checkpoint-runtime.name" . | trunc 58 | trimSuffix "-") | quote }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" | quote }}
{{- end }}

{{- define "checkpoint-runtime.testLabels" -}}
helm.sh/chart: {{ include "checkpoint-runtime.chart" . | quote }}
{{ include "checkpoint-runtime.testSelectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/component: test
app.kubernetes.io/part-of: checkpoint-runtime
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "checkpoint-runtime.labels" -}}
{{ include "checkpoint-runtime.componentLabels" (list . "runtime") }}
{{- end }}




{{- define "checkpoint-runtime.kubernetesStore" -}}
{{- if eq .Values.checkpoint.store "kubernetes" }}true{{ end }}
{{- end }}

{{/* Role and RoleBinding only where the API is used and the chart is asked to grant it. */}}
{{- define "checkpoint-runtime.renderRbac" -}}
{{- if and .Values.rbac.create (include "checkpoint-runtime.kubernetesStore" .) }}true{{ end }}
{{- end }}

{{/* repository:tag[@digest] of an image object. */}}
{{- define "checkpoint-runtime.imageRef" -}}
{{- $ref := printf "%s:%s" .repository .tag }}
{{- if .digest }}{{ $ref = printf "%s@%s" $ref .digest }}{{ end }}
{{- $ref }}
{{- end }}

{{- define "checkpoint-runtime.image" -}}
{{- include "checkpoint-runtime.imageRef" (dict "repository" .Values.image.repository "tag" .Values.image.tag "digest" .Values.image.digest) }}
{{- end }}

{{/*
The test image: the runtime image (it ships python3) unless tests.image names another; an
empty repository or tag falls back to the runtime's, and the runtime's digest applies only
when both do (it pins exactly that image).
*/}}
{{- define "checkpoint-runtime.testImage" -}}
{{- $test := .Values.tests.image }}
{{- $digest := $test.digest }}
{{- if not (or $test.repository $test.tag) }}
{{- $digest = default .Values.image.digest $test.digest }}
{{- end }}
{{- include "checkpoint-runtime.imageRef" (dict "repository" (default .Values.image.repository $test.repository) "tag" (default .Values.image.tag $test.tag) "digest" $digest) }}
{{- end }}

{{/*
The restricted pod-security profile. It is fixed here rather than offered as values: no valid
values document can weaken it.
*/}}
{{- define "checkpoint-runtime.podSecurityContext" -}}
{{- /* int64: values given as JSON arrive as float64 and would print as 1e+07. */}}
runAsNonRoot: true
runAsUser: {{ int64 .Values.podSecurityContext.runAsUser }}
runAsGroup: {{ int64 .Values.podSecurityContext.runAsGroup }}
fsGroup: {{ int64 .Values.podSecurityContext.fsGroup }}
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "checkpoint-runtime.containerSecurityContext" -}}
allowPrivilegeEscalation: false
privileged: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The runtime config (schemas/runtime-config.schema.json), built key by key so that it matches
that schema exactly instead of echoing values through.
*/}}
{{- define "checkpoint-runtime.runtimeConfig" -}}
{{- $cp := .Values.checkpoint }}
{{- $store := dict "backend" $cp.store "deadlineSeconds" $cp.deadlineSeconds "debounceSeconds" $cp.debounceSeconds }}
{{- $election := dict "enabled" false }}
{{- if include "checkpoint-runtime.kubernetesStore" . }}
{{- $_ := set $store "namespace" (include "checkpoint-runtime.coordinationNamespace" .) }}
{{- $_ := set $store "leaseName" (include "checkpoint-runtime.leaseName" .) }}
{{- if $cp.legacyConfigMap }}
{{- $_ := set $store "legacyConfigMap" $cp.legacyConfigMap }}
{{- end }}
{{- if include "checkpoint-runtime.namesScope" . }}
{{- $_ := set $store "discovery" "names" }}
{{- end }}
{{- $le := $cp.leaderElection }}
{{- $election = dict "enabled" true "leaseDurationSeconds" $le.leaseDurationSeconds "renewDeadlineSeconds" $le.renewDeadlineSeconds "retryPeriodSeconds" $le.retryPeriodSeconds }}
{{- else }}
{{- $_ := set $store "path" $cp.file.path }}
{{- end }}
{{- $sink := dict "kind" .Values.sink.kind }}
{{- if eq .Values.sink.kind "file" }}
{{- $_ := set $sink "path" .Values.sink.path }}
{{- end }}
{{- $config := dict "store" $store "leaderElection" $election "http" (dict "port" .Values.service.port "bindAddress" .Values.service.bindAddress) "sink" $sink "collectors" $cp.collectors }}
{{- toPrettyJson $config }}
{{- end }}

{{/*
Render-time value checks: rules JSON Schema cannot express (they compare two values). Each
refusal starts with "checkpoint-runtime: invalid values:" and names the key path.

Requests above limits would be rejected by the API server when the Deployment is created.
Call with (list "<values path>" <resources>).
*/}}
{{- define "checkpoint-runtime.millicores" -}}
{{- if hasSuffix "m" . }}{{ trimSuffix "m" . | float64 }}{{ else }}{{ mulf (float64 .) 1000 }}{{ end }}
{{- end }}

{{- define "checkpoint-runtime.bytes" -}}
{{- $units := dict "Ki" 1024 "Mi" 1048576 "Gi" 1073741824 "k" 1000 "M" 1000000 "G" 1000000000 }}
{{- $unit := regexFind "[A-Za-z]+$" . }}
{{- mulf (trimSuffix $unit . | float64) (get $units $unit) }}
{{- end }}

{{- define "checkpoint-runtime.checkResources" -}}
{{- $path := index . 0 }}
{{- $resources := index . 1 }}
{{- range $resource, $unit := dict "cpu" "checkpoint-runtime.millicores" "memory" "checkpoint-runtime.bytes" }}
{{- $request := get $resources.requests $resource }}
{{- $limit := get $resources.limits $resource }}
{{- if gt (include $unit $request | float64) (include $unit $limit | float64) }}
{{- fail (printf "checkpoint-runtime: invalid values: %s.requests.%s (%s) must not exceed %s.limits.%s (%s)" $path $resource $request $path $resource $limit) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Two collectors with the same collector namespace would share one shard and overwrite
each other's cursors; the runtime refuses that config at startup, the chart already at install.
*/}}
{{- define "checkpoint-runtime.checkCollectors" -}}
{{- $owners := dict }}
{{- range $index, $collector := .Values.checkpoint.collectors }}
{{- $parts := list }}
{{- if $collector.tailnet }}{{ $parts = append $parts $collector.tailnet }}{{ end }}
{{- $parts = append $parts $collector.kind }}
{{- if eq $collector.kind "objectstore" }}{{ $parts = append $parts $collector.feed }}{{ end }}
{{- $namespace := join "/" $parts }}
{{- if hasKey $owners $namespace }}
{{- fail (printf "checkpoint-runtime: invalid values: checkpoint.collectors[%d]: collector namespace %q is already used by checkpoint.collectors[%v] (two collectors would share one shard)" $index $namespace (get $owners $namespace)) }}
{{- end }}
{{- $_ := set $owners $namespace $index }}
{{- end }}
{{- end }}
