{{/*
The runtime config (schemas/runtime-config.schema.json), built key by key so that it matches
that schema exactly instead of echoing values through.
*/}}
{{- define "checkpoint-runtime.runtimeConfig" -}}
{{- $cp := .Values.checkpoint }}
{{- $store := dict "backend" $cp.store "deadlineSeconds" $cp.deadlineSeconds "debounceSeconds" $cp.debounceSeconds "maxChunks" $cp.maxChunks }}
{{- $election := dict "enabled" false }}
{{- if include "checkpoint-runtime.kubernetesStore" . }}
{{- $_ := set $store "namespace" (include "checkpoint-runtime.coordinationNamespace" .) }}
{{- $_ := set $store "leaseName" (include "checkpoint-runtime.leaseName" .) }}
{{- $_ := set $store "writeBudgetBytesPerSecond" $cp.writeBudgetBytesPerSecond }}
{{- $_ := set $store "etcdQuotaBytes" $cp.etcdQuotaBytes }}
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
