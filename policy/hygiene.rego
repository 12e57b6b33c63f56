# Chart hygiene (HYG-20, HYG-22, HYG-23): recommended labels, selectors on name and instance only,
# names within Kubernetes limits, optional objects selecting the chart's own pods, a proper test hook.
package main

import rego.v1

label_name := "app.kubernetes.io/name"

label_instance := "app.kubernetes.io/instance"

selector_keys := {label_name, label_instance}

recommended_labels := [
	label_name,
	label_instance,
	"app.kubernetes.io/version",
	"app.kubernetes.io/managed-by",
	"helm.sh/chart",
]

# --- HYG-20: recommended labels, valid label values, name lengths ------------------------------

deny contains msg if {
	some head in heads
	some key in recommended_labels
	object.get(head.labels, key, "") == ""
	msg := concat("", ["HYG-20 ", head.label, ": recommended label ", key, " is missing"])
}

deny contains msg if {
	some head in heads
	some key, value in head.labels
	not valid_label_value(value)
	msg := concat("", ["HYG-20 ", head.label, ": label ", key, "=", value, " is not a valid label value (<= 63 characters, alphanumeric ends)"])
}

deny contains msg if {
	some obj in pod_objects
	obj.kind != "Pod"
	some key, value in object.get(obj, ["spec", "template", "metadata", "labels"], {})
	not valid_label_value(value)
	msg := concat("", ["HYG-20 ", label(obj), ": pod template label ", key, "=", value, " is not a valid label value"])
}

valid_label_value(value) if {
	is_string(value)
	count(value) <= 63
	regex.match(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`, value)
}

dns_label_pattern := `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`

dns1035_label_pattern := `^[a-z]([-a-z0-9]*[a-z0-9])?$`

dns_subdomain_pattern := `^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`

# RBAC object names are path segments and may hold ':'; everything else here is a DNS subdomain.
deny contains msg if {
	some head in heads
	not head.kind in {"Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
	not valid_subdomain(head.name)
	msg := concat("", ["HYG-20 ", head.label, ": name must be a DNS-1123 subdomain of at most 253 characters"])
}

valid_subdomain(name) if {
	count(name) <= 253
	regex.match(dns_subdomain_pattern, name)
}

deny contains msg if {
	some obj in objects_of_kind("Service")
	name := object.get(obj, ["metadata", "name"], "")
	not valid_dns1035_label(name)
	msg := concat("", ["HYG-20 ", label(obj), ": a Service name must be a DNS-1035 label of at most 63 characters (has ", format_int(count(name), 10), ")"])
}

valid_dns1035_label(name) if {
	count(name) <= 63
	regex.match(dns1035_label_pattern, name)
}

deny contains msg if {
	some entry in pod_containers
	name := object.get(entry.container, "name", "")
	not valid_dns_label(name)
	msg := concat("", ["HYG-20 ", entry.label, ": container name ", name, " must be a DNS-1123 label of at most 63 characters"])
}

valid_dns_label(name) if {
	count(name) <= 63
	regex.match(dns_label_pattern, name)
}

deny contains msg if {
	some entry in pod_containers
	some port in object.get(entry.container, "ports", [])
	name := object.get(port, "name", "")
	count(name) > 15
	msg := concat("", ["HYG-20 ", entry.label, ": container ", entry.container.name, ": port name ", name, " is longer than 15 characters"])
}

# --- HYG-20 / HYG-22: selectors use name and instance only and select the chart's own pods -------

# Every selector the chart renders, as a small record of what the rules below compare.
selector_record(obj, path) := {
	"label": label(obj),
	"kind": obj.kind,
	"field": concat(".", path),
	"match_labels": object.get(obj, path, {}),
	"expressions": object.get(obj, array.concat(array.slice(path, 0, count(path) - 1), ["matchExpressions"]), []),
	"own_labels": labels_of(obj),
	"template_labels": object.get(obj, ["spec", "template", "metadata", "labels"], {}),
}

selector_kinds := {
	"Deployment": ["spec", "selector", "matchLabels"],
	"StatefulSet": ["spec", "selector", "matchLabels"],
	"DaemonSet": ["spec", "selector", "matchLabels"],
	"ReplicaSet": ["spec", "selector", "matchLabels"],
	"PodDisruptionBudget": ["spec", "selector", "matchLabels"],
	"ServiceMonitor": ["spec", "selector", "matchLabels"],
	"PodMonitor": ["spec", "selector", "matchLabels"],
	"NetworkPolicy": ["spec", "podSelector", "matchLabels"],
	"Service": ["spec", "selector"],
}

selectors := [selector_record(obj, path) |
	some kind in object.keys(selector_kinds)
	path := selector_kinds[kind]
	some obj in objects_of_kind(kind)
]

deny contains msg if {
	some sel in selectors
	keys := object.keys(sel.match_labels)
	keys != selector_keys
	msg := concat("", ["HYG-20 ", sel.label, ": ", sel.field, " must select on exactly [", concat(", ", sort(selector_keys)), "], has [", concat(", ", sort(keys)), "]"])
}

deny contains msg if {
	some sel in selectors
	sel.kind != "Service"
	count(sel.expressions) > 0
	msg := concat("", ["HYG-20 ", sel.label, ": ", trim_suffix(sel.field, ".matchLabels"), ".matchExpressions widens the selection; use matchLabels name and instance"])
}

# Per document: a selector names the object's own release (its name and instance labels).
deny contains msg if {
	some sel in selectors
	some key in selector_keys
	value := object.get(sel.match_labels, key, "")
	value != ""
	own := object.get(sel.own_labels, key, "")
	value != own
	msg := concat("", ["HYG-22 ", sel.label, ": ", sel.field, " ", key, "=", value, " is not the object's own ", own])
}

# A workload's template carries the labels its own selector asks for.
deny contains msg if {
	some sel in selectors
	sel.kind in workload_kinds
	some key, value in sel.match_labels
	object.get(sel.template_labels, key, "") != value
	msg := concat("", ["HYG-20 ", sel.label, ": pod template labels do not carry ", sel.field, " ", key, "=", value])
}

selects(match_labels, labels) if {
	count(match_labels) > 0
	every key, value in match_labels {
		object.get(labels, key, "") == value
	}
}

# Seen whole: pod selectors of optional objects and of the Service select a pod the chart renders.
deny contains msg if {
	combined
	count(workload_pod_labels) > 0
	some sel in selectors
	sel.kind in {"PodDisruptionBudget", "NetworkPolicy", "Service"}
	not selects_chart_pod(sel.match_labels)
	msg := concat("", ["HYG-22 ", sel.label, ": ", sel.field, " selects none of the chart's pods"])
}

# A NetworkPolicy that restricts egress names, in every egress rule, both the destinations and
# the ports: a rule without `to` allows every address, one without `ports` every port.
deny contains msg if {
	some obj in objects_of_kind("NetworkPolicy")
	"Egress" in object.get(obj, ["spec", "policyTypes"], [])
	some index, rule in object.get(obj, ["spec", "egress"], [])
	some field in ["to", "ports"]
	count(object.get(rule, field, [])) == 0
	msg := sprintf("HYG-22 %s: spec.egress[%d] has no %s, so it allows every %s", [label(obj), index, field, open_egress_noun[field]])
}

open_egress_noun := {"to": "destination", "ports": "port"}

selects_chart_pod(match_labels) if {
	some labels in workload_pod_labels
	selects(match_labels, labels)
}

# Seen whole: a ServiceMonitor selects the chart's own Service.
deny contains msg if {
	combined
	some sel in selectors
	sel.kind == "ServiceMonitor"
	not selects_chart_service(sel.match_labels)
	msg := concat("", ["HYG-22 ", sel.label, ": ", sel.field, " selects none of the chart's Services"])
}

selects_chart_service(match_labels) if {
	some service in objects_of_kind("Service")
	selects(match_labels, labels_of(service))
}

# A test pod matched by the workload selector joins the Service and the PDB while it runs.
warn contains msg if {
	combined
	some pod in objects_of_kind("Pod")
	is_test_hook(pod)
	some sel in selectors
	sel.kind in {"Service", "PodDisruptionBudget"}
	selects(sel.match_labels, labels_of(pod))
	msg := concat("", ["HYG-22 ", label(pod), ": the test pod matches the selector of ", sel.label])
}

# --- HYG-23: the test pod is a helm test hook that is cleaned up -------------------------------

deny contains msg if {
	some pod in objects_of_kind("Pod")
	not is_test_hook(pod)
	msg := concat("", ["HYG-23 ", label(pod), ": a bare Pod must be a helm.sh/hook: test"])
}

deny contains msg if {
	some pod in objects_of_kind("Pod")
	is_test_hook(pod)
	object.get(annotations_of(pod), "helm.sh/hook-delete-policy", "") == ""
	msg := concat("", ["HYG-23 ", label(pod), ": the test hook needs a helm.sh/hook-delete-policy"])
}

deny contains msg if {
	some pod in objects_of_kind("Pod")
	is_test_hook(pod)
	restart := object.get(pod, ["spec", "restartPolicy"], "Always")
	restart == "Always"
	msg := concat("", ["HYG-23 ", label(pod), ": a test pod must not restart (restartPolicy Never or OnFailure)"])
}
