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
{{- range $index, $cidr := $policy.egress.apiServer.cidrs }}
{{- include "checkpoint-runtime.checkCidr" (list (printf "networkPolicy.egress.apiServer.cidrs[%d]" $index) $cidr) }}
{{- include "checkpoint-runtime.checkAnyAddress" (list (printf "networkPolicy.egress.apiServer.cidrs[%d]" $index) $cidr $policy.egress.allowAnyAddress) }}
{{- end }}
{{- range $entry, $destination := $policy.egress.to }}
{{- range $index, $cidr := $destination.cidrs }}
{{- include "checkpoint-runtime.checkCidr" (list (printf "networkPolicy.egress.to[%d].cidrs[%d]" $entry $index) $cidr) }}
{{- include "checkpoint-runtime.checkAnyAddress" (list (printf "networkPolicy.egress.to[%d].cidrs[%d]" $entry $index) $cidr $policy.egress.allowAnyAddress) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A /0 CIDR (0.0.0.0/0, ::/0) in a restricted egress allows every address of its family: the
restriction would restrict nothing. Only with networkPolicy.egress.allowAnyAddress, which says
so on purpose. Call with (list "<values path>" <cidr> <allowAnyAddress>).
*/}}
{{- define "checkpoint-runtime.checkAnyAddress" -}}
{{- $path := index . 0 }}
{{- $cidr := index . 1 }}
{{- if and (eq (index (splitList "/" $cidr) 1) "0") (not (index . 2)) }}
{{- fail (printf "checkpoint-runtime: invalid values: %s: %s allows every address, which undoes the egress restriction; list the destinations' own ranges, or set networkPolicy.egress.allowAnyAddress: true to allow it on purpose" $path $cidr) }}
{{- end }}
{{- end }}

{{/*
Credentials never go into the chart's values in clear: a collector URL is stored in the runtime's
ConfigMap (readable by anyone who may read ConfigMaps in the namespace) and shown in the
collectors' error messages, and an extraEnv value in the Deployment (readable by anyone who may
read Deployments). Refused: user information in a collector URL (`scheme://user:secret@host`),
and an extraEnv literal whose name or value looks like a secret. The messages name the key, never
the value. Give credentials from a Secret: envFrom, or extraEnv with valueFrom.secretKeyRef.
*/}}
{{- define "checkpoint-runtime.checkSecrets" -}}
{{- range $index, $collector := .Values.checkpoint.collectors }}
{{- if regexMatch "^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*@" (toString $collector.url) }}
{{- fail (printf "checkpoint-runtime: invalid values: checkpoint.collectors[%d].url carries user information (credentials before an @ in its host part), which would be stored in the runtime's ConfigMap and shown in error messages; give the credentials from a Secret (envFrom, or extraEnv with valueFrom.secretKeyRef) and drop them from the URL (the value is not repeated here)" $index) }}
{{- end }}
{{- end }}
{{- range $index, $variable := .Values.extraEnv }}
{{- if hasKey $variable "value" }}
{{- $secretName := regexMatch "(?i)(secret|passw(or)?d|token|credential|private_?key|api_?key|access_?key|session_?key)" $variable.name }}
{{- $secretValue := regexMatch "AKIA[0-9A-Z]{16}|-----BEGIN [A-Z ]*PRIVATE KEY|[A-Za-z][A-Za-z0-9+.-]*://[^/?#\\s]*:[^/?#\\s]*@|\\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9-]{10,})" (toString $variable.value) }}
{{- if or $secretName $secretValue }}
{{- fail (printf "checkpoint-runtime: invalid values: extraEnv[%d] (%s): a literal value %s looks like a secret and would be stored in clear in the Deployment; read it from a Secret with valueFrom.secretKeyRef or envFrom (the value is not repeated here)" $index $variable.name (ternary "for a variable whose name" "that" $secretName)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
A CIDR with bits set beyond its prefix (10.0.0.1/24) is refused by the API server; the pattern
of the schema cannot see bits, so the chart checks them here, naming the key. The address is read
as groups (IPv4: 4 decimal octets of 8 bits; IPv6: 8 hexadecimal groups of 16 bits, "::"
expanded), and every bit past the prefix must be zero. Call with (list "<values path>" <cidr>).
*/}}
{{- define "checkpoint-runtime.checkCidr" -}}
{{- $path := index . 0 }}
{{- $cidr := index . 1 }}
{{- $address := lower (index (splitList "/" $cidr) 0) }}
{{- $prefix := atoi (index (splitList "/" $cidr) 1) }}
{{- $groups := list }}
{{- $width := 8 }}
{{- if contains "." $address }}
{{- range splitList "." $address }}{{ $groups = append $groups (atoi .) }}{{ end }}
{{- else }}
{{- $width = 16 }}
{{- $digits := dict "0" 0 "1" 1 "2" 2 "3" 3 "4" 4 "5" 5 "6" 6 "7" 7 "8" 8 "9" 9 "a" 10 "b" 11 "c" 12 "d" 13 "e" 14 "f" 15 }}
{{- $halves := splitList "::" $address }}
{{- $texts := list }}
{{- range $index, $half := $halves }}
{{- $part := list }}
{{- if $half }}{{ $part = splitList ":" $half }}{{ end }}
{{- if eq $index 1 }}
{{- range until (int (sub 8 (add (len $texts) (len $part)))) }}{{ $texts = append $texts "0" }}{{ end }}
{{- end }}
{{- $texts = concat $texts $part }}
{{- end }}
{{- range $texts }}
{{- $value := 0 }}
{{- range splitList "" . }}{{ $value = add (mul $value 16) (get $digits .) }}{{ end }}
{{- $groups = append $groups $value }}
{{- end }}
{{- end }}
{{- range $index, $value := $groups }}
{{- $start := mul $index $width }}
{{- $hostBits := min $width (max 0 (sub (add $start $width) $prefix)) }}
{{- $block := 1 }}
{{- range until (int $hostBits) }}{{ $block = mul $block 2 }}{{ end }}
{{- if mod $value $block }}
{{- fail (printf "checkpoint-runtime: invalid values: %s: %s has bits set beyond the /%d prefix (the API server refuses it); use the network address of the range" $path $cidr $prefix) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
checkpoint.store.legacyConfigMap gets update in the Role (rbac.scope=names) and is read by the store, so
it may never name an object the release owns: its config ConfigMap (a pod could rewrite its own
collectors and sink), a shard or one of its chunk slots, the Lease, any other name the chart
renders, or the CA bundle every namespace is given (kube-root-ca.crt). The schema refuses the
shapes it can see; the names that depend on the release are checked here.
*/}}
{{- define "checkpoint-runtime.checkLegacyConfigMap" -}}
{{- $legacy := .Values.checkpoint.store.legacyConfigMap }}
{{- if $legacy }}
{{- $lease := include "checkpoint-runtime.leaseName" . }}
{{- $owned := dict "kube-root-ca.crt" "the CA bundle Kubernetes puts in every namespace" }}
{{- $_ := set $owned (include "checkpoint-runtime.configName" .) "the release's own runtime config" }}
{{- $_ = set $owned (include "checkpoint-runtime.fullname" .) "the name of the release's Deployment, Service and Role" }}
{{- $_ = set $owned (include "checkpoint-runtime.testName" .) "the release's test pod" }}
{{- $_ = set $owned $lease "the store's Lease" }}
{{- if .Values.serviceAccount.name }}{{ $_ = set $owned .Values.serviceAccount.name "the release's ServiceAccount" }}{{ end }}
{{- range .Values.checkpoint.collectors }}
{{- $shard := include "checkpoint-runtime.shardName" (list $lease (include "checkpoint-runtime.collectorNamespace" .)) }}
{{- $_ = set $owned $shard "a shard of this store" }}
{{- if regexMatch (printf "^%s-c[ab][0-9]+$" (regexQuoteMeta $shard)) $legacy }}
{{- $_ = set $owned $legacy "a chunk slot of this store" }}
{{- end }}
{{- end }}
{{- if hasKey $owned $legacy }}
{{- fail (printf "checkpoint-runtime: invalid values: checkpoint.store.legacyConfigMap: %q is %s; the Role would grant update on it. Name the previous release's checkpoint ConfigMap, or leave it empty" $legacy (get $owned $legacy)) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
More than one leadership bucket is led with the kubernetes store's Leases, and the legacy
migration runs with one bucket (it reads every shard); the runtime refuses the same at startup.
*/}}
{{- define "checkpoint-runtime.checkBuckets" -}}
{{- $buckets := int (default 1 .Values.checkpoint.store.buckets) }}
{{- if gt $buckets 1 }}
{{- if not (include "checkpoint-runtime.kubernetesStore" .) }}
{{- fail (printf "checkpoint-runtime: invalid values: checkpoint.store.buckets: %d buckets need the kubernetes store (checkpoint.store.backend kubernetes)" $buckets) }}
{{- end }}
{{- if .Values.checkpoint.store.legacyConfigMap }}
{{- fail (printf "checkpoint-runtime: invalid values: checkpoint.store.buckets: %d buckets with checkpoint.store.legacyConfigMap: the legacy migration runs with one bucket; run it with buckets 1, then remove legacyConfigMap and raise buckets" $buckets) }}
{{- end }}
{{- end }}
{{- end }}
