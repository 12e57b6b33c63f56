# RBAC (RBAC-1 to RBAC-8, docs/rbac.md): the chart may grant exactly the store's permissions, in one
# namespace, to its own ServiceAccount, and nothing else for any valid values.
package main

import rego.v1

rbac_api_group := "rbac.authorization.k8s.io"

rule_objects := array.concat(object.get(by_kind, "Role", []), object.get(by_kind, "ClusterRole", []))

# --- the expected permission set --------------------------------------------------------------

# One permission = one (verb, resource.group, resourceName) triple, written as a readable string;
# a rule without resourceNames grants the verb on every name ("" here).
permission(group, resource, verb, name) := concat("", [verb, " ", qualified(resource, group), pinned(name)])

qualified(resource, "") := resource

qualified(resource, group) := concat("", [resource, ".", group]) if group != ""

pinned("") := ""

pinned(name) := concat("", ["/", name]) if name != ""

# A null resourceNames (`resourceNames:` with nothing after it) is empty to the API server: every name.
resource_names(rule) := names if {
	names := object.get(rule, "resourceNames", [])
	is_array(names)
} else := []

names_or_any(rule) := resource_names(rule) if count(resource_names(rule)) > 0

names_or_any(rule) := [""] if count(resource_names(rule)) == 0

role_permissions(role) := {permission(group, resource, verb, name) |
	some rule in object.get(role, "rules", [])
	some group in object.get(rule, "apiGroups", [])
	some resource in object.get(rule, "resources", [])
	some verb in object.get(rule, "verbs", [])
	some name in names_or_any(rule)
}

# Exactly the store's permissions (docs/rbac.md), for the Role's scope (the chart's rbac.scope):
# - namespace: configmaps get/list/update/create unpinned (create cannot be scoped by name, list
#   by name needs a field selector discovery does not have);
# - names: configmaps get/update pinned to the store's ConfigMap names, create unpinned, no list.
# Both: leases get/update pinned to the Lease name; leases create unpinned.
expected_permissions(role) := configmap_permissions(role) | {p |
	some lease in expected_leases(role)
	some p in lease_permissions(lease)
}

lease_permissions(lease) := {
	permission("coordination.k8s.io", "leases", "get", lease),
	permission("coordination.k8s.io", "leases", "update", lease),
	permission("coordination.k8s.io", "leases", "create", ""),
}

configmap_permissions(role) := {
	permission("", "configmaps", "get", ""),
	permission("", "configmaps", "list", ""),
	permission("", "configmaps", "update", ""),
	permission("", "configmaps", "create", ""),
} if {
	not names_scope(role)
}

configmap_permissions(role) := {permission("", "configmaps", "create", "")} | {permission("", "configmaps", verb, name) |
	some verb in ["get", "update"]
	some name in expected_configmap_names(role)
} if {
	names_scope(role)
}

# --- the names scope ----------------------------------------------------------------------------

# The store's discovery mode in config.json (store.discovery): "names" with the names scope.
config_discovery := {object.get(config, ["store", "discovery"], "labels") | some config in runtime_configs}

pinned_configmap_names(role) := {name |
	some rule in object.get(role, "rules", [])
	"configmaps" in object.get(rule, "resources", [])
	some name in resource_names(rule)
}

# Seen whole, config.json says which scope the Role must have; alone, a Role without an unpinned
# ConfigMap list is held to the names scope (list is what only the namespace scope grants).
names_scope(_) if "names" in config_discovery

names_scope(role) if {
	count(config_discovery) == 0
	not permission("", "configmaps", "list", "") in role_permissions(role)
}

# The names the Role must pin: derived from config.json exactly as the runtime derives them when
# the release is seen whole, otherwise the names the Role itself pins.
expected_configmap_names(role) := names if {
	count(runtime_configs) == 1
	some config in runtime_configs
	names := store_configmap_names(config)
} else := pinned_configmap_names(role)

store_configmap_names(config) := ({shard_name(lease, collector_namespace(collector)) |
	lease := object.get(config, ["store", "leaseName"], "")
	some collector in object.get(config, "collectors", [])
} | {chunk_slot_name(shard_name(lease, collector_namespace(collector)), generation, index) |
	lease := object.get(config, ["store", "leaseName"], "")
	some collector in object.get(config, "collectors", [])
	some generation in ["a", "b"]
	some index in numbers.range(0, object.get(config, ["store", "maxChunks"], 8) - 1) # the runtime's default
}) | {legacy |
	legacy := object.get(config, ["store", "legacyConfigMap"], "")
	legacy != ""
}

# A collector's shard key: [<tailnet>/]flowlogs or [<tailnet>/]objectstore/<feed>.
collector_namespace(collector) := concat("/", [part |
	some part in [object.get(collector, "tailnet", ""), collector.kind, feed_of(collector)]
	part != ""
])

feed_of(collector) := object.get(collector, "feed", "") if collector.kind == "objectstore"

feed_of(collector) := "" if collector.kind != "objectstore"

# The runtime's shard_name: a readable prefix from the Lease name, the shard key with "/" as "."
# (at most 80 characters) and 16 hex digits of sha256("<lease>\0<shard key>"), within the 253
# characters of a DNS-1123 subdomain.
shard_name(lease, shard) := name if {
	readable := substring(trim(regex.replace(replace(lower(shard), "/", "."), `[^a-z0-9.-]+`, "-"), "-."), 0, 80)
	digest := substring(crypto.sha256(concat("\u0000", [lease, shard])), 0, 16)
	room := max([((253 - count(digest)) - count(readable)) - 2, 0])
	prefix := trim(substring(regex.replace(lower(lease), `[^a-z0-9.-]+`, "-"), 0, room), "-.")
	joined := concat("-", [part | some part in [prefix, readable, digest]; part != ""])
	name := regex.replace(joined, `[-.]{2,}`, "-")
}

# The runtime's chunk_slot_name: a chunk slot of a shard, "<shard name>-c<generation><index>".
chunk_slot_name(shard, generation, index) := sprintf("%s-c%s%d", [shard, generation, index])

config_lease_names := {name |
	some config in runtime_configs
	lease := object.get(config, ["store", "leaseName"], "")
	lease != ""
	some name in store_lease_names(lease, object.get(config, ["store", "buckets"], 1))
}

# The stores the runtime configs name: [leaseName, buckets].
config_stores := {[lease, buckets] |
	some config in runtime_configs
	lease := object.get(config, ["store", "leaseName"], "")
	lease != ""
	buckets := object.get(config, ["store", "buckets"], 1)
}

# The runtime's Leases of a store (election/buckets.py lease_names): its own (leaseName) and,
# with several leadership buckets, each bucket's "<lease>-NN-of-BB" and each membership slot's
# "<lease>-member-NN-of-BB".
store_lease_names(lease, buckets) := {lease} if {
	buckets <= 1
} else := ({lease} | {sprintf("%s-%02d-of-%02d", [lease, i, buckets]) |
	some i in numbers.range(0, buckets - 1)
}) | {sprintf("%s-member-%02d-of-%02d", [lease, i, buckets]) |
	some i in numbers.range(0, buckets - 1)
}

pinned_lease_names(role) := {name |
	some rule in object.get(role, "rules", [])
	"leases" in object.get(rule, "resources", [])
	some name in resource_names(rule)
}

# The Leases the Role must pin: the runtime config's (leaseName and buckets) when the release is
# seen whole, otherwise the names the Role itself pins when they are one store's Leases.
expected_leases(role) := config_lease_names if {
	count(config_stores) == 1
} else := names if {
	count(config_stores) == 0
	names := pinned_lease_names(role)
	some lease in names
	store_lease_names(lease, (count(names) - 1) / 2) == names
} else := {"<leaseName>"}

# --- RBAC-1: namespaced only -----------------------------------------------------------------

deny contains msg if {
	some head in heads
	head.kind in {"ClusterRole", "ClusterRoleBinding"}
	msg := concat("", ["RBAC-1 ", head.label, ": cluster-scoped RBAC is never rendered"])
}

# --- RBAC-2: explicit namespace, the coordination namespace ------------------------------------

deny contains msg if {
	some head in heads
	head.kind in {"Role", "RoleBinding"}
	head.namespace == ""
	msg := concat("", ["RBAC-2 ", head.label, ": metadata.namespace must be set explicitly to the coordination namespace"])
}

deny contains msg if {
	some head in heads
	head.kind in {"Role", "RoleBinding"}
	some config in runtime_configs
	want := object.get(config, ["store", "namespace"], "")
	want != ""
	head.namespace != want
	msg := concat("", ["RBAC-2 ", head.label, ": namespace ", head.namespace, " is not the coordination namespace ", want, " of config.json"])
}

# Per document too: whatever config.json says, RBAC never lands in a namespace the cluster owns.
system_namespaces := {"kube-system", "kube-public", "kube-node-lease"}

deny contains msg if {
	some head in heads
	head.kind in {"Role", "RoleBinding"}
	head.namespace in system_namespaces
	msg := concat("", ["RBAC-2 ", head.label, ": namespace ", head.namespace, " belongs to the cluster, not to the chart"])
}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	some role in objects_of_kind("Role")
	binding.roleRef.name == role.metadata.name
	namespace_of(binding) != namespace_of(role)
	msg := concat("", ["RBAC-2 ", label(binding), ": namespace ", namespace_of(binding), " differs from its Role's ", namespace_of(role)])
}

# --- RBAC-3: the Role's permissions equal the store's as a set -----------------------------------

deny contains msg if {
	some role in objects_of_kind("Role")
	actual := role_permissions(role)
	want := expected_permissions(role)
	extra := actual - want
	missing := want - actual
	count(extra) + count(missing) > 0
	msg := concat("", ["RBAC-3 ", label(role), ": rules differ from the store's permissions: extra [", concat(", ", sort(extra)), "]; missing [", concat(", ", sort(missing)), "]"])
}

# --- RBAC-4: no wildcards, no nonResourceURLs -------------------------------------------------

deny contains msg if {
	some obj in rule_objects
	some i, rule in object.get(obj, "rules", [])
	some field in ["apiGroups", "resources", "verbs", "resourceNames"]
	some value in object.get(rule, field, [])
	contains(value, "*")
	msg := concat("", ["RBAC-4 ", label(obj), ": rules[", format_int(i, 10), "].", field, " contains the wildcard ", value])
}

deny contains msg if {
	some obj in rule_objects
	some i, rule in object.get(obj, "rules", [])
	count(object.get(rule, "nonResourceURLs", [])) > 0
	msg := concat("", ["RBAC-4 ", label(obj), ": rules[", format_int(i, 10), "] grants nonResourceURLs"])
}

deny contains msg if {
	some obj in objects_of_kind("ClusterRole")
	obj.aggregationRule
	msg := concat("", ["RBAC-4 ", label(obj), ": aggregationRule pulls in rules the chart does not list"])
}

# --- RBAC-5: resources that amount to cluster or workload takeover -------------------------------

forbidden_resources := {
	"secrets",
	"pods", "pods/exec", "pods/attach", "pods/portforward", "pods/ephemeralcontainers", "pods/proxy",
	"nodes", "nodes/proxy", "services/proxy", "services/status",
	"serviceaccounts", "serviceaccounts/token",
	"roles", "rolebindings", "clusterroles", "clusterrolebindings",
	"certificatesigningrequests", "certificatesigningrequests/approval",
	"certificatesigningrequests/status", "signers",
	"mutatingwebhookconfigurations", "validatingwebhookconfigurations",
	"validatingadmissionpolicies", "validatingadmissionpolicybindings",
	"tokenreviews", "persistentvolumes", "namespaces",
}

deny contains msg if {
	some obj in rule_objects
	some i, rule in object.get(obj, "rules", [])
	some resource in object.get(rule, "resources", [])
	resource in forbidden_resources
	msg := concat("", ["RBAC-5 ", label(obj), ": rules[", format_int(i, 10), "] grants access to the forbidden resource ", resource])
}

# --- RBAC-6: privilege-escalation verbs -------------------------------------------------------

deny contains msg if {
	some obj in rule_objects
	some i, rule in object.get(obj, "rules", [])
	some verb in object.get(rule, "verbs", [])
	verb in {"bind", "escalate", "impersonate"}
	msg := concat("", ["RBAC-6 ", label(obj), ": rules[", format_int(i, 10), "] grants the escalation verb ", verb])
}

# --- RBAC-7: Lease get/update pinned by name; create in its own unpinned rule ---------------------

lease_rules(obj) := [{"index": i, "rule": rule} |
	some i, rule in object.get(obj, "rules", [])
	"coordination.k8s.io" in object.get(rule, "apiGroups", [])
	"leases" in object.get(rule, "resources", [])
]

deny contains msg if {
	some obj in rule_objects
	some entry in lease_rules(obj)
	i := entry.index
	rule := entry.rule
	some verb in object.get(rule, "verbs", [])
	verb in {"get", "update"}
	count(resource_names(rule)) == 0
	msg := concat("", ["RBAC-7 ", label(obj), ": rules[", format_int(i, 10), "] grants leases ", verb, " on every name; pin it by resourceNames to the Lease"])
}

deny contains msg if {
	some obj in rule_objects
	some entry in lease_rules(obj)
	i := entry.index
	rule := entry.rule
	"create" in object.get(rule, "verbs", [])
	verbs := {v | some v in rule.verbs}
	verbs != {"create"}
	msg := concat("", ["RBAC-7 ", label(obj), ": rules[", format_int(i, 10), "] mixes leases create with [", concat(", ", sort(verbs - {"create"})), "]; create needs its own rule"])
}

deny contains msg if {
	some obj in rule_objects
	some entry in lease_rules(obj)
	i := entry.index
	rule := entry.rule
	"create" in object.get(rule, "verbs", [])
	count(resource_names(rule)) > 0
	msg := concat("", ["RBAC-7 ", label(obj), ": rules[", format_int(i, 10), "] pins leases create by name, which RBAC never matches (create has no name at authorization time)"])
}

deny contains msg if {
	some role in objects_of_kind("Role")
	count(config_lease_names) > 0
	pinned := pinned_lease_names(role)
	pinned != config_lease_names
	msg := concat("", ["RBAC-7 ", label(role), ": pins Lease [", concat(", ", sort(pinned)), "] but config.json's leaseName and buckets give [", concat(", ", sort(config_lease_names)), "]"])
}

# --- RBAC-8: the RoleBinding binds the chart's Role to the chart's ServiceAccount only -----------

privileged_role_names := {"cluster-admin", "admin", "edit"}

privileged_subject_names := {"system:anonymous", "system:unauthenticated", "system:authenticated", "system:masters"}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	ref := object.get(binding, "roleRef", {})
	object.get(ref, "kind", "") != "Role"
	msg := concat("", ["RBAC-8 ", label(binding), ": roleRef.kind is ", object.get(ref, "kind", ""), "; only the chart's namespaced Role may be bound"])
}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	object.get(binding, ["roleRef", "apiGroup"], "") != rbac_api_group
	msg := concat("", ["RBAC-8 ", label(binding), ": roleRef.apiGroup must be ", rbac_api_group])
}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	name := object.get(binding, ["roleRef", "name"], "")
	privileged_role(name)
	msg := concat("", ["RBAC-8 ", label(binding), ": binds the built-in role ", name])
}

privileged_role(name) if name in privileged_role_names

privileged_role(name) if startswith(name, "system:")

deny contains msg if {
	combined
	some binding in objects_of_kind("RoleBinding")
	name := object.get(binding, ["roleRef", "name"], "")
	not name in {role.metadata.name | some role in objects_of_kind("Role")}
	msg := concat("", ["RBAC-8 ", label(binding), ": roleRef ", name, " is not a Role this chart renders"])
}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	count(object.get(binding, "subjects", [])) != 1
	msg := concat("", ["RBAC-8 ", label(binding), ": must have exactly one subject (the chart's ServiceAccount), has ", format_int(count(object.get(binding, "subjects", [])), 10)])
}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	some subject in object.get(binding, "subjects", [])
	object.get(subject, "kind", "") != "ServiceAccount"
	msg := concat("", ["RBAC-8 ", label(binding), ": subject ", object.get(subject, "kind", ""), " ", object.get(subject, "name", ""), " is not a ServiceAccount"])
}

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	some subject in object.get(binding, "subjects", [])
	name := object.get(subject, "name", "")
	privileged_subject(name)
	msg := concat("", ["RBAC-8 ", label(binding), ": subject ", name, " is a built-in identity, not the chart's ServiceAccount"])
}

privileged_subject(name) if name in privileged_subject_names

privileged_subject(name) if startswith(name, "system:")

privileged_subject(name) if name == "default"

deny contains msg if {
	some binding in objects_of_kind("RoleBinding")
	some subject in object.get(binding, "subjects", [])
	subject.kind == "ServiceAccount"
	object.get(subject, "namespace", "") == ""
	msg := concat("", ["RBAC-8 ", label(binding), ": ServiceAccount subject ", object.get(subject, "name", ""), " needs an explicit namespace (the release namespace)"])
}

# Seen whole, the subject must be the ServiceAccount the chart's pods run as, in their namespace.
chart_service_accounts := {[namespace_of(obj), object.get(pod_spec(obj), "serviceAccountName", "")] |
	some obj in pod_objects
	not is_test_hook(obj)
}

deny contains msg if {
	combined
	count(chart_service_accounts) > 0
	some binding in objects_of_kind("RoleBinding")
	some subject in object.get(binding, "subjects", [])
	subject.kind == "ServiceAccount"
	not [object.get(subject, "namespace", ""), subject.name] in chart_service_accounts
	msg := concat("", ["RBAC-8 ", label(binding), ": subject ", object.get(subject, "namespace", ""), "/", subject.name, " is not the ServiceAccount the chart's pods run as [", concat(", ", sort([concat("/", pair) | some pair in chart_service_accounts])), "]"])
}
