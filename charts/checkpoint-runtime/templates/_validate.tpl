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
{{- $namespace := include "checkpoint-runtime.collectorNamespace" $collector }}
{{- if hasKey $owners $namespace }}
{{- fail (printf "checkpoint-runtime: invalid values: checkpoint.collectors[%d]: collector namespace %q is already used by checkpoint.collectors[%v] (two collectors would share one shard)" $index $namespace (get $owners $namespace)) }}
{{- end }}
{{- $_ := set $owners $namespace $index }}
{{- end }}
{{- end }}

{{/*
A restricted egress is part of the NetworkPolicy, and with the kubernetes store it must name
the API server: an egress rule without destinations would allow every address instead.
*/}}
{{- define "checkpoint-runtime.checkEgress" -}}
{{- $policy := .Values.networkPolicy }}
{{- if $policy.egress.restrict }}
{{- if not $policy.enabled }}
{{- fail "checkpoint-runtime: invalid values: networkPolicy.egress.restrict needs networkPolicy.enabled: the egress rules are part of the NetworkPolicy" }}
{{- end }}
{{- if and (include "checkpoint-runtime.kubernetesStore" .) (not $policy.egress.apiServer.cidrs) }}
{{- fail "checkpoint-runtime: invalid values: networkPolicy.egress.apiServer.cidrs is required when networkPolicy.egress.restrict is true with the kubernetes store: list the kubernetes Service's ClusterIP and the API server's endpoint addresses (kubectl get endpointslices -n default -l kubernetes.io/service-name=kubernetes)" }}
{{- end }}
{{- end }}
{{- end }}
