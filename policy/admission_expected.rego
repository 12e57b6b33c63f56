# RBAC-11, seen whole: the admission policies and bindings are exactly the chart's own. The gate
# builds them here from config.json and the account the pods run as, independently of the
# templates, so an edited expression, a dropped validation or variable, a widened match, a
# renamed policy or a binding that no longer denies is refused, whether a chart edit or values
# produced it. Messages are left out of the comparison: they refuse nothing.
package main

import rego.v1

# The release's one runtime config and one runtime account, or nothing to compare with.
admission_config := config if {
	count(runtime_configs) == 1
	some config in runtime_configs
}

admission_account := concat(":", ["system:serviceaccount", pair[0], pair[1]]) if {
	count(chart_service_accounts) == 1
	some pair in chart_service_accounts
}

# <fullname>.<release namespace>: the runtime's Deployment carries the full name.
admission_policy_name := concat(".", [object.get(obj, ["metadata", "name"], ""), namespace_of(obj)]) if {
	deployments := [obj | some obj in objects_of_kind("Deployment")]
	count(deployments) == 1
	some obj in deployments
}

reserved_policy_name := concat("", [admission_policy_name, ".reserved"])

admission_lease := object.get(admission_config, ["store", "leaseName"], "")

# With several leadership buckets: the store's Lease, each bucket's and each membership slot's.
admission_leases := sort(store_lease_names(admission_lease, object.get(admission_config, ["store", "buckets"], 1)))

admission_lease_variables := [
	{"name": "lease", "expression": cel_literal(admission_lease)},
	{"name": "leases", "expression": cel_literal(admission_leases)},
] if {
	count(admission_leases) > 1
} else := [{"name": "lease", "expression": cel_literal(admission_lease)}]

# The Lease names a check admits, of the name `name`.
admission_lease_match(name) := concat("", [name, " in variables.leases"]) if {
	count(admission_leases) > 1
} else := concat("", [name, " == variables.lease"])

admission_heads := sort({shard_name(admission_lease, collector_namespace(collector)) |
	some collector in object.get(admission_config, "collectors", [])
})

# A CEL string or list literal, as Helm's toJson writes it.
cel_literal(value) := json.marshal(value)

admission_common_variables := array.concat(
	array.concat(
		[
			{"name": "heads", "expression": cel_literal(admission_heads)},
			{"name": "maxChunks", "expression": format_int(object.get(admission_config, ["store", "maxChunks"], 8), 10)},
		],
		admission_lease_variables,
	),
	[{"name": "legacy", "expression": cel_literal(object.get(admission_config, ["store", "legacyConfigMap"], ""))}],
)

configmap_rule(operations) := {"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": ["configmaps"]}

lease_rule(operations) := {"apiGroups": ["coordination.k8s.io"], "apiVersions": ["v1"], "operations": operations, "resources": ["leases"]}

store_labelled(obj) := concat(" && ", [
	concat("", ["has(", obj, ".metadata.labels)"]),
	concat("", ["\"checkpoint-runtime.io/store\" in ", obj, ".metadata.labels"]),
	concat("", [obj, ".metadata.labels[\"checkpoint-runtime.io/store\"] == variables.storeLabel"]),
	concat("", ["\"checkpoint-runtime.io/component\" in ", obj, ".metadata.labels"]),
	concat("", [obj, ".metadata.labels[\"checkpoint-runtime.io/component\"] in [\"checkpoint-shard\", \"checkpoint-chunk\"]"]),
])

# <head>-c<a|b><index below maxChunks>, for the name `name`.
cel_chunk_slot(name) := concat("", [
	"variables.heads.exists(h, ", name, ".startsWith(h + \"-c\") && ", name,
	".substring(size(h) + 2).matches(\"^[ab](0|[1-9][0-9]{0,2})$\") && int(", name,
	".substring(size(h) + 3)) < variables.maxChunks)",
])

cel_forbidden(expression) := {"expression": expression, "reason": "Forbidden"}

# The policy narrowing the runtime's own ServiceAccount.
expected_admission_spec := {
	"failurePolicy": "Fail",
	"matchConstraints": {"resourceRules": [configmap_rule(["CREATE", "UPDATE"]), lease_rule(["CREATE"])]},
	"matchConditions": [{"name": "runtime-service-account", "expression": concat("", ["request.userInfo.username == ", cel_literal(admission_account)])}],
	"variables": array.concat(admission_common_variables, [
		{"name": "storeLabel", "expression": cel_literal(substring(crypto.sha256(concat("\u0000", ["store", admission_lease])), 0, 16))},
		{"name": "configMap", "expression": "request.resource.resource == \"configmaps\""},
		{"name": "chunkSlot", "expression": cel_chunk_slot("object.metadata.name")},
		{"name": "labelled", "expression": store_labelled("object")},
		{"name": "wasLabelled", "expression": concat("", ["oldObject != null && ", store_labelled("oldObject")])},
	]),
	"validations": [
		cel_forbidden("!variables.configMap || request.operation != \"CREATE\" || ((object.metadata.name in variables.heads || variables.chunkSlot) && variables.labelled)"),
		cel_forbidden("!variables.configMap || request.operation != \"UPDATE\" || (variables.legacy != \"\" && object.metadata.name == variables.legacy) || (variables.wasLabelled && variables.labelled)"),
		cel_forbidden(concat("", ["variables.configMap || ", admission_lease_match("object.metadata.name")])),
	],
}

# The policy reserving the store's names for that account, in the coordination namespace.
expected_reserved_spec(group) := {
	"failurePolicy": "Fail",
	"matchConstraints": {
		"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": object.get(admission_config, ["store", "namespace"], "")}},
		"resourceRules": [configmap_rule(["CREATE", "UPDATE", "DELETE"]), lease_rule(["CREATE", "UPDATE", "DELETE"])],
	},
	"matchConditions": [{"name": "not-the-store", "expression": concat("", ["request.userInfo.username != ", cel_literal(admission_account)])}],
	"variables": array.concat(
		array.concat([{"name": "name", "expression": "(object != null ? object : oldObject).metadata.name"}], admission_common_variables),
		[
			{"name": "breakGlassGroup", "expression": cel_literal(group)},
			{"name": "reserved", "expression": concat("", [
				"request.resource.resource == \"leases\" ? ", admission_lease_match("variables.name"), " : variables.name in variables.heads",
				" || (variables.legacy != \"\" && variables.name == variables.legacy) || ",
				cel_chunk_slot("variables.name"),
			])},
		],
	),
	"validations": [cel_forbidden(concat("", [
		"!variables.reserved || (request.operation == \"DELETE\" && namespaceObject != null && has(namespaceObject.metadata.deletionTimestamp))",
		" || (has(request.userInfo.groups) && (\"system:masters\" in request.userInfo.groups",
		" || (variables.breakGlassGroup != \"\" && variables.breakGlassGroup in request.userInfo.groups)))",
	]))],
}

# The break-glass group the render names: a group outside system: (every account, every
# authenticated user and the cluster's own components are in system: groups), or none.
rendered_group(policy) := group if {
	some variable in object.get(policy, ["spec", "variables"], [])
	variable.name == "breakGlassGroup"
	json.is_valid(variable.expression)
	group := json.unmarshal(variable.expression)
	is_string(group)
}

group_or_none(policy) := rendered_group(policy)

group_or_none(policy) := "" if not rendered_group(policy)

valid_group(group) if {
	regex.match(`^$|^[A-Za-z0-9][A-Za-z0-9:._@/-]*$`, group)
	not startswith(group, "system:")
}

# What the chart's policies must be, by name (nothing while the release cannot be seen whole).
expected_admission_specs(policy) := {
	admission_policy_name: expected_admission_spec,
	reserved_policy_name: expected_reserved_spec(group_or_none(policy)),
}

# A spec as the comparison sees it: without the validations' messages.
compared_spec(spec) := object.union(spec, {"validations": [object.remove(validation, ["message", "messageExpression"]) |
	some validation in object.get(spec, "validations", [])
]}) if is_object(spec)

compared_spec(spec) := {} if not is_object(spec)

# The fields of `spec` that differ from `expected` ("spec.variables[3]", "spec.failurePolicy").
spec_differences(spec, expected) := sort({path |
	some key in (object.keys(spec) | object.keys(expected))
	some path in field_differences(key, object.get(spec, key, null), object.get(expected, key, null))
})

field_differences(key, got, want) := {concat("", ["spec.", key, "[", format_int(i, 10), "]"]) |
	some i in numbers.range(0, max([count(got), count(want)]) - 1)
	item_at(got, i) != item_at(want, i)
} if {
	is_array(got)
	is_array(want)
	got != want
}

field_differences(key, got, want) := {concat("", ["spec.", key])} if {
	not all_arrays(got, want)
	got != want
}

field_differences(_, got, want) := set() if got == want

item_at(items, i) := items[i] if i < count(items)

item_at(items, i) := null if i >= count(items)

all_arrays(got, want) if {
	is_array(got)
	is_array(want)
}

admission_comparable if {
	admission_config
	admission_account
	admission_policy_name
}

deny contains msg if {
	combined
	admission_comparable
	some policy in objects_of_kind(vap_kind)
	expected := expected_admission_specs(policy)
	name := object.get(policy, ["metadata", "name"], "")
	not name in object.keys(expected)
	msg := concat("", ["RBAC-11 ", label(policy), ": not one of the chart's policies (", admission_policy_name, ", ", reserved_policy_name, ")"])
}

deny contains msg if {
	combined
	admission_comparable
	some policy in objects_of_kind(vap_kind)
	expected := expected_admission_specs(policy)
	want := expected[object.get(policy, ["metadata", "name"], "")]
	got := compared_spec(object.get(policy, "spec", {}))
	differences := spec_differences(got, want)
	count(differences) > 0
	msg := concat("", ["RBAC-11 ", label(policy), ": differs from the chart's own policy at ", concat(", ", differences), " (derived from config.json and the pods' ServiceAccount ", admission_account, ")"])
}

deny contains msg if {
	some policy in objects_of_kind(vap_kind)
	group := rendered_group(policy)
	not valid_group(group)
	msg := concat("", ["RBAC-11 ", label(policy), ": break-glass group ", group, " is a system: group or not a group name; every account or user of a kind is in a system: group"])
}

# Admission on (some policy rendered): both policies, each with its binding, exactly so.
deny contains msg if {
	combined
	admission_comparable
	count(objects_of_kind(vap_kind)) > 0
	some name in [admission_policy_name, reserved_policy_name]
	some kind in [vap_kind, vap_binding_kind]
	not name in {object.get(obj, ["metadata", "name"], "") | some obj in objects_of_kind(kind)}
	msg := concat("", ["RBAC-11 ", kind, " ", name, ": missing; the chart renders both admission policies and their bindings"])
}

deny contains msg if {
	combined
	admission_comparable
	some binding in objects_of_kind(vap_binding_kind)
	name := object.get(binding, ["metadata", "name"], "")
	object.get(binding, "spec", {}) != {"policyName": name, "validationActions": ["Deny"]}
	msg := concat("", ["RBAC-11 ", label(binding), ": spec must be exactly {policyName: ", name, ", validationActions: [Deny]} (no matchResources, paramRef or other actions)"])
}
