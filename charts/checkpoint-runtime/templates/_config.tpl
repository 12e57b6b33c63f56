{{/*
The runtime config (schemas/runtime-config.schema.json): .Values.checkpoint has its shape and is
rendered as it is, with what only the chart knows added: the store's namespace and Lease name
(defaults derived from the release), its discovery (from rbac.scope), whether it elects a leader
(the kubernetes store), http (the Service's port) and sink. checkpoint.file is the chart's own
(the file store's volume) and keys of the other backend are left out.
*/}}
{{- define "checkpoint-runtime.runtimeConfig" -}}
{{- $config := omit (.Values.checkpoint | toJson | fromJson) "file" }}
{{- $store := $config.store }}
{{- /* one bucket is the runtime's default: left out, the config is the one rendered before buckets */}}
{{- if eq (int (default 1 $store.buckets)) 1 }}
{{- $store = omit $store "buckets" }}
{{- end }}
{{- if include "checkpoint-runtime.kubernetesStore" . }}
{{- $store = omit $store "path" }}
{{- $_ := set $store "namespace" (include "checkpoint-runtime.coordinationNamespace" .) }}
{{- $_ := set $store "leaseName" (include "checkpoint-runtime.leaseName" .) }}
{{- if not $store.legacyConfigMap }}
{{- $store = omit $store "legacyConfigMap" }}
{{- end }}
{{- if include "checkpoint-runtime.namesScope" . }}
{{- $_ := set $store "discovery" "names" }}
{{- end }}
{{- $_ := set $config.leaderElection "enabled" true }}
{{- else }}
{{- $store = omit $store "namespace" "leaseName" "writeBudgetBytesPerSecond" "etcdQuotaBytes" "legacyConfigMap" "buckets" }}
{{- $_ := set $config "leaderElection" (dict "enabled" false) }}
{{- end }}
{{- $_ := set $config "store" $store }}
{{- if and .Values.admissionPolicy.enabled (include "checkpoint-runtime.kubernetesStore" .) }}{{- $_ := set $config "admissionPolicy" (dict "enabled" true "name" (include "checkpoint-runtime.admissionPolicyName" .)) }}{{- end }}
{{- $sink := dict "kind" .Values.sink.kind }}
{{- if eq .Values.sink.kind "file" }}
{{- $_ := set $sink "path" .Values.sink.path }}
{{- end }}
{{- $_ := set $config "sink" $sink }}
{{- $_ := set $config "http" (dict "port" .Values.service.port "bindAddress" .Values.service.bindAddress) }}
{{- toPrettyJson $config }}
{{- end }}
