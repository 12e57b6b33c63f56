# Shared helpers: which manifests are under test, and how to read them.
#
# conftest passes one parsed document as `input` (`conftest test`), or with `--combine` a list of
# {"path", "contents"} where a multi-document YAML file's contents is a list of documents.
# Every rule iterates `documents`, so the same files run unchanged in both modes. Rules that compare
# objects with each other (RoleBinding subject vs the Deployment's ServiceAccount, ...) only fire
# when `combined` holds, because a single document cannot show its counterpart.
package main

import rego.v1

default combined := false

combined if is_array(input)

documents := documents_of(input)

documents_of(x) := [doc |
	some file in x
	some doc in as_list(file.contents)
	is_object(doc)
] if is_array(x)

documents_of(x) := [x] if is_object(x)

as_list(contents) := contents if is_array(contents)

as_list(contents) := [contents] if not is_array(contents)

# "<Kind> <name>", the object part of every message.
label(obj) := concat("", [obj.kind, " ", object.get(obj, ["metadata", "name"], "<unnamed>")])

# Documents grouped by kind, built once per evaluation, so a rule about Roles touches only Roles.
by_kind[kind] := [obj | some obj in documents; obj.kind == kind] if {
	some kind in {obj.kind | some obj in documents}
}

objects_of_kind(kind) := object.get(by_kind, kind, [])

# Who each document is, without its body, for the rules that look at every document.
heads := [{
	"kind": obj.kind,
	"name": object.get(obj, ["metadata", "name"], ""),
	"namespace": namespace_of(obj),
	"labels": labels_of(obj),
	"label": label(obj),
} |
	some obj in documents
]

labels_of(obj) := object.get(obj, ["metadata", "labels"], {})

annotations_of(obj) := object.get(obj, ["metadata", "annotations"], {})

namespace_of(obj) := object.get(obj, ["metadata", "namespace"], "")

# Kinds that carry a pod template; `pod_spec` reads the spec wherever the kind keeps it.
workload_kinds := {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}

pod_spec(obj) := obj.spec.template.spec if obj.kind in workload_kinds

pod_spec(obj) := obj.spec.jobTemplate.spec.template.spec if obj.kind == "CronJob"

pod_spec(obj) := obj.spec if obj.kind == "Pod"

pod_objects := [obj | some kind in (workload_kinds | {"CronJob", "Pod"}); some obj in objects_of_kind(kind)]

# A `helm test` hook pod runs once and exits: no probes, and no API token.
is_test_hook(obj) if {
	hooks := split(object.get(annotations_of(obj), "helm.sh/hook", ""), ",")
	some hook in hooks
	trim_space(hook) == "test"
}

# Every container of a pod, init and ephemeral ones included, with the field it came from.
containers(spec) := [{"field": field, "container": c} |
	some field in ["initContainers", "containers", "ephemeralContainers"]
	some c in object.get(spec, field, [])
]

# Every container of every pod, computed once per evaluation rather than in each rule.
pod_containers := [{"label": label(obj), "pod_context": object.get(spec, "securityContext", {}), "field": entry.field, "container": entry.container} |
	some obj in pod_objects
	spec := pod_spec(obj)
	some entry in containers(spec)
]

# The chart's own pods: the pod-template labels of every rendered workload.
workload_pod_labels := [object.get(obj, ["spec", "template", "metadata", "labels"], {}) |
	some obj in documents
	obj.kind in workload_kinds
]

# The runtime config the chart renders as config.json in its ConfigMap ("<fullname>-config").
runtime_configs := [config |
	some cm in objects_of_kind("ConfigMap")
	raw := object.get(cm, ["data", "config.json"], "")
	raw != ""
	config := json.unmarshal(raw)
]
