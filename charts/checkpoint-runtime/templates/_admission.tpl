{{/*
The admission policy's inputs. Its objects are cluster-scoped, so the name carries the release
namespace too: two releases of one name in two namespaces never share a policy.
*/}}
{{- define "checkpoint-runtime.admissionPolicyName" -}}
{{- printf "%s.%s" (include "checkpoint-runtime.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "." | trimSuffix "-" }}
{{- end }}

{{/* The policy reserving the store's names for its ServiceAccount (same namespace suffix). */}}
{{- define "checkpoint-runtime.reservedPolicyName" -}}
{{- printf "%s.reserved" (include "checkpoint-runtime.admissionPolicyName" .) }}
{{- end }}

{{/* The store's shard (head) names as a JSON list: one per configured collector, sorted. */}}
{{- define "checkpoint-runtime.storeShardNames" -}}
{{- $lease := include "checkpoint-runtime.leaseName" . }}
{{- $names := list }}
{{- range .Values.checkpoint.collectors }}
{{- $names = append $names (include "checkpoint-runtime.shardName" (list $lease (include "checkpoint-runtime.collectorNamespace" .))) }}
{{- end }}
{{- $names | uniq | sortAlpha | toJson }}
{{- end }}


{{/* The store label of every shard and chunk slot: 16 hex digits of sha256("store\0<lease>"). */}}
{{- define "checkpoint-runtime.storeLabel" -}}
{{- printf "store\x00%s" (include "checkpoint-runtime.leaseName" .) | sha256sum | trunc 16 }}
{{- end }}
