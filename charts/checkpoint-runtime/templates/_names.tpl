{{/*
Names. Kubernetes limits most names to 63 characters (DNS-1123 labels), so every name is
truncated to 63 and never ends in a dash.
*/}}
{{- define "checkpoint-runtime.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "checkpoint-runtime.fullname" -}}
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

{{/* The runtime config ConfigMap: "<fullname>-config" (the runtime, the gate and docs rely on it). */}}
{{- define "checkpoint-runtime.configName" -}}
{{- printf "%s-config" (include "checkpoint-runtime.fullname" .) }}
{{- end }}

{{/* Name of the helm test pod, kept within 63 characters. */}}
{{- define "checkpoint-runtime.testName" -}}
{{- printf "%s-test" (include "checkpoint-runtime.fullname" . | trunc 58 | trimSuffix "-") }}
{{- end }}

{{/* The coordination namespace: shards, the Lease, the Role and the RoleBinding live here. */}}
{{- define "checkpoint-runtime.coordinationNamespace" -}}
{{- default .Release.Namespace .Values.checkpoint.store.namespace }}
{{- end }}

{{- define "checkpoint-runtime.leaseName" -}}
{{- default (include "checkpoint-runtime.fullname" .) .Values.checkpoint.store.leaseName }}
{{- end }}

{{/*
The ServiceAccount. With serviceAccount.create=false the chart cannot invent an account, so
a name is required (the schema says so too; this message is for --skip-schema-validation).
*/}}
{{- define "checkpoint-runtime.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "checkpoint-runtime.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "checkpoint-runtime: invalid values: serviceAccount.name is required when serviceAccount.create is false: name the existing ServiceAccount the runtime runs as" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The collector namespace of one collector entry, which is its shard key:
[<tailnet>/]flowlogs or [<tailnet>/]objectstore/<feed> (the runtime's collector_namespace).
*/}}
{{- define "checkpoint-runtime.collectorNamespace" -}}
{{- $parts := list }}
{{- if .tailnet }}{{ $parts = append $parts .tailnet }}{{ end }}
{{- $parts = append $parts .kind }}
{{- if eq .kind "objectstore" }}{{ $parts = append $parts .feed }}{{ end }}
{{- join "/" $parts }}
{{- end }}

{{/*
The ConfigMap name of one shard: call with (list <lease name> <shard key>). The same
derivation as the runtime's shard_name, character for character (a test compares the two over
generated inputs): a readable prefix from the Lease name, the shard key with "/" as "." (at
most 80 characters), and the first 16 hex digits of sha256("<lease>\0<shard key>"), within
the 253 characters of a DNS-1123 subdomain. The inputs the schemas admit are ASCII.
*/}}
{{- define "checkpoint-runtime.shardName" -}}
{{- $lease := index . 0 }}
{{- $shard := index . 1 }}
{{- $readable := regexReplaceAll "[^a-z0-9.-]+" (lower $shard | replace "/" ".") "-" | trimAll "-." | trunc 80 }}
{{- $digest := printf "%s\x00%s" $lease $shard | sha256sum | trunc 16 }}
{{- $room := sub (sub (sub 253 (len $digest)) (len $readable)) 2 }}
{{- /* trunc with a negative count keeps the end of a string: never pass one */}}
{{- $prefix := regexReplaceAll "[^a-z0-9.-]+" (lower $lease) "-" | trunc (int (max $room 0)) | trimAll "-." }}
{{- $parts := list }}
{{- range list $prefix $readable $digest }}{{ if . }}{{ $parts = append $parts . }}{{ end }}{{ end }}
{{- regexReplaceAll "[-.]{2,}" (join "-" $parts) "-" }}
{{- end }}

{{/*
The chunk slot names of one shard, as a JSON list: call with (list <shard ConfigMap name>
<maxChunks>). The runtime's chunk_slot_name: "<shard name>-c<generation><index>" for the
generations a and b and every decimal index below maxChunks (a test compares the two).
*/}}
{{- define "checkpoint-runtime.chunkSlotNames" -}}
{{- $shard := index . 0 }}
{{- $count := int (index . 1) }}
{{- $names := list }}
{{- range $generation := list "a" "b" }}
{{- range $index := until $count }}
{{- $names = append $names (printf "%s-c%s%d" $shard $generation $index) }}
{{- end }}
{{- end }}
{{- $names | toJson }}
{{- end }}

{{/*
Every ConfigMap the store reads and writes, by name, as a JSON list (sorted, no duplicates):
per configured collector its shard (the head) and the 2 x maxChunks chunk slots it may use,
and the legacy ConfigMap when one is migrated from.
*/}}
{{- define "checkpoint-runtime.storeConfigMapNames" -}}
{{- $lease := include "checkpoint-runtime.leaseName" . }}
{{- $maxChunks := .Values.checkpoint.store.maxChunks }}
{{- $names := list }}
{{- range .Values.checkpoint.collectors }}
{{- $shard := include "checkpoint-runtime.shardName" (list $lease (include "checkpoint-runtime.collectorNamespace" .)) }}
{{- $names = append $names $shard }}
{{- $names = concat $names (include "checkpoint-runtime.chunkSlotNames" (list $shard $maxChunks) | fromJsonArray) }}
{{- end }}
{{- with .Values.checkpoint.store.legacyConfigMap }}{{ $names = append $names . }}{{ end }}
{{- $names | uniq | sortAlpha | toJson }}
{{- end }}

{{/* rbac.scope=names: ConfigMap access pinned to the store's own names, discovery by name. */}}
{{- define "checkpoint-runtime.namesScope" -}}
{{- if eq .Values.rbac.scope "names" }}true{{ end }}
{{- end }}

{{/*
Every Lease the store reads and writes, as a JSON list: the store's own Lease (leaseName) and,
with more than one leadership bucket, each bucket's (<leaseName>-NN-of-BB) and each membership
slot's (<leaseName>-member-NN-of-BB), B of each (the runtime's election/buckets.py).
*/}}
{{- define "checkpoint-runtime.leaseNames" -}}
{{- $lease := include "checkpoint-runtime.leaseName" . }}
{{- $buckets := int (default 1 .Values.checkpoint.store.buckets) }}
{{- $names := list $lease }}
{{- if gt $buckets 1 }}
{{- range $index := until $buckets }}
{{- $names = append $names (printf "%s-%02d-of-%02d" $lease $index $buckets) }}
{{- end }}
{{- range $index := until $buckets }}
{{- $names = append $names (printf "%s-member-%02d-of-%02d" $lease $index $buckets) }}
{{- end }}
{{- end }}
{{- $names | toJson }}
{{- end }}
