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
{{- if eq .Values.checkpoint.store.backend "kubernetes" }}true{{ end }}
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
The sizeLimit of the file store's emptyDir: checkpoint.file.sizeLimit, or derived from what the
store can keep there. Each object (a shard's head, each of its chunk slots in both generations,
the legacy ConfigMap) is at most 1 MiB of payload plus 256 KiB of metadata (1280 KiB), and a
rewrite keeps a temp copy of one object per shard until its rename: so
(shards x (2 + 2 x maxChunks) + 1) x 1280 KiB, rounded up to whole MiB, at least 16 MiB.
*/}}
{{- define "checkpoint-runtime.fileSizeLimit" -}}
{{- $file := .Values.checkpoint.file }}
{{- if $file.sizeLimit }}
{{- $file.sizeLimit }}
{{- else }}
{{- $shards := len .Values.checkpoint.collectors }}
{{- $chunks := int (include "checkpoint-runtime.maxChunks" .) }}
{{- $objects := add1 (mul $shards (add 2 (mul 2 $chunks))) }}
{{- $mebibytes := div (add (mul $objects 1280) 1023) 1024 }}
{{- printf "%dMi" (max 16 $mebibytes) }}
{{- end }}
{{- end }}

{{/* Chunk slots per generation of each shard (checkpoint.store.maxChunks). */}}
{{- define "checkpoint-runtime.maxChunks" -}}
{{- int .Values.checkpoint.store.maxChunks }}
{{- end }}
