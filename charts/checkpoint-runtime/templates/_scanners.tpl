{{/*
Exceptions for the manifest scanners platform teams run on renders (checkov, kube-score), as
annotations of the object they concern, each only when the gap it explains is really there:
  checkov.io/skipN: "<check id>=<reason>"  (checkov reads one check per annotation; a reason
                                            must not contain "=")
  kube-score/ignore: "<check>,<check>"     (kube-score takes no reason: each is given in a
                                            comment line above it)
Call with (list $ "runtime") for the Deployment or (list $ "test") for the `helm test` pod.
*/}}
{{- define "checkpoint-runtime.scannerExceptions" -}}
{{- $root := index . 0 }}
{{- $for := index . 1 }}
{{- $values := $root.Values }}
{{- $checkov := list }}
{{- $kubeScore := list }}
{{- $image := include "checkpoint-runtime.image" $root }}
{{- if eq $for "test" }}{{ $image = include "checkpoint-runtime.testImage" $root }}{{ end }}
{{- if not (contains "@" $image) }}
{{- $checkov = append $checkov (list "CKV_K8S_43" "the image is pinned by tag only: the chart cannot know the digest of the image you build; set image.digest to pin it by content") }}
{{- end }}
{{- if ne $values.image.pullPolicy "Always" }}
{{- $reason := printf "imagePullPolicy %s with a pinned tag: Always would need the registry at every pod start and fails for images preloaded onto nodes; set image.pullPolicy to Always to re-check pull secrets on every start" $values.image.pullPolicy }}
{{- $checkov = append $checkov (list "CKV_K8S_15" $reason) }}
{{- $kubeScore = append $kubeScore (list "container-image-pull-policy" $reason) }}
{{- end }}
{{- $ephemeral := "the root filesystem is read-only and the only scratch space is the /tmp emptyDir with its own sizeLimit" }}
{{- if eq $for "runtime" }}
{{- if not $values.networkPolicy.enabled }}
{{- $reason := "networkPolicy.enabled is false (the default): the peers allowed to reach the runtime and the API server's address differ per cluster; enable it with networkPolicy.ingressFrom" }}
{{- $checkov = append $checkov (list "CKV2_K8S_6" $reason) }}
{{- $kubeScore = append $kubeScore (list "pod-networkpolicy" $reason) }}
{{- else if not (dig "egress" "restrict" false $values.networkPolicy) }}
{{- $kubeScore = append $kubeScore (list "pod-networkpolicy" "networkPolicy.egress.restrict is false: egress stays open, as the API server's address and the collectors' endpoints differ per cluster; restrict it with their CIDRs") }}
{{- end }}
{{- $secretEnv := false }}
{{- range $values.extraEnv }}{{ if and .valueFrom .valueFrom.secretKeyRef }}{{ $secretEnv = true }}{{ end }}{{ end }}
{{- range $values.envFrom }}{{ if .secretRef }}{{ $secretEnv = true }}{{ end }}{{ end }}
{{- if $secretEnv }}
{{- $checkov = append $checkov (list "CKV_K8S_35" "extraEnv or envFrom puts Secret values in the environment as asked: the S3 client reads its credentials from there (or from workload identity); mount the Secret with extraVolumes where a client reads files") }}
{{- end }}
{{- /* kube-score asks for a budget only where two or more replicas run. */}}
{{- if and (include "checkpoint-runtime.kubernetesStore" $root) (ge (int $values.replicaCount) 2) (not $values.podDisruptionBudget.enabled) }}
{{- $kubeScore = append $kubeScore (list "deployment-has-poddisruptionbudget" "podDisruptionBudget.enabled is false (the default, like every optional object): a standby replica takes over the Lease when the leader is evicted; enable it to bound voluntary disruptions") }}
{{- end }}
{{- if not (include "checkpoint-runtime.kubernetesStore" $root) }}
{{- $reason := "the file store has no leader election: exactly one writer, so one replica, replaced by Recreate and never two during a rollout" }}
{{- $kubeScore = append $kubeScore (list "deployment-replicas" $reason) }}
{{- $kubeScore = append $kubeScore (list "deployment-strategy" $reason) }}
{{- $ephemeral = printf "%s; a file store on an emptyDir would count against a container limit and be evicted with its checkpoints (use checkpoint.file.existingClaim)" $ephemeral }}
{{- end }}
{{- $kubeScore = append $kubeScore (list "container-ephemeral-storage-request-and-limit" $ephemeral) }}
{{- else }}
{{- $checkov = append $checkov (list "CKV_K8S_8" "the helm test pod sends one request and exits: there is no long-running process to probe") }}
{{- $checkov = append $checkov (list "CKV_K8S_9" "the helm test pod sends one request and exits: there is no long-running process to probe") }}
{{- $reason := "the helm test pod serves nothing and exists only while helm test runs" }}
{{- $checkov = append $checkov (list "CKV2_K8S_6" $reason) }}
{{- $kubeScore = append $kubeScore (list "pod-networkpolicy" $reason) }}
{{- $kubeScore = append $kubeScore (list "container-ephemeral-storage-request-and-limit" "the root filesystem is read-only and the pod mounts no volume: it writes nothing but its log") }}
{{- end }}
{{- range $index, $skip := $checkov }}
{{- if contains "=" (index $skip 1) }}
{{- fail (printf "checkpoint-runtime: the reason of the %s exception contains \"=\", which checkov cannot read" (index $skip 0)) }}
{{- end }}
checkov.io/skip{{ add1 $index }}: {{ printf "%s=%s" (index $skip 0) (index $skip 1) | quote }}
{{- end }}
{{- if $kubeScore }}
{{- range $kubeScore }}
# kube-score {{ index . 0 }}: {{ index . 1 }}
{{- end }}
{{- $ids := list }}
{{- range $kubeScore }}{{ $ids = append $ids (index . 0) }}{{ end }}
kube-score/ignore: {{ join "," $ids | quote }}
{{- end }}
{{- end }}
