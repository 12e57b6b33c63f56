# RBAC-3 in the names scope (rbac.scope=names): ConfigMap get/update pinned to the names the
# runtime derives from config.json, create unpinned, no list.
package main

import rego.v1

names_lease := "cr-checkpoint-runtime"

names_collectors := [
	{"kind": "flowlogs", "url": "http://flows.example"},
	{"kind": "objectstore", "tailnet": "corp.example", "feed": "audit", "url": "file:///feeds/audit"},
]

# The default release's config.json with the names discovery, these collectors and a legacy map.
names_config(collectors, legacy) := json.patch(fixture_config, [{
	"op": "replace",
	"path": "/data/config.json",
	"value": json.marshal(json.patch(json.unmarshal(fixture_config.data["config.json"]), [
		{"op": "replace", "path": "/collectors", "value": collectors},
		{"op": "add", "path": "/store/discovery", "value": "names"},
		{"op": "add", "path": "/store/legacyConfigMap", "value": legacy},
	])),
}])

names_shards := [shard_name(names_lease, "flowlogs"), shard_name(names_lease, "corp.example/objectstore/audit")]

# Each shard's chunk slots at the default maxChunks (8): generations a and b, indexes 0..7.
names_slots := [chunk_slot_name(shard, generation, index) |
	some shard in names_shards
	some generation in ["a", "b"]
	some index in numbers.range(0, 7)
]

# The heads, their chunk slots, and the legacy ConfigMap last.
names_pinned := array.concat(array.concat(names_shards, names_slots), ["legacy-checkpoints"])

names_rules(names) := [
	{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"], "resourceNames": names},
	{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
]

names_role(configmap_rules) := json.patch(fixture_role, [{
	"op": "replace",
	"path": "/rules",
	"value": array.concat(configmap_rules, array.slice(fixture_role.rules, 1, count(fixture_role.rules))),
}])

names_docs(configmap_rules) := array.concat(
	array.concat(array.slice(fixture_release, 0, index_config), [names_config(names_collectors, "legacy-checkpoints"), names_role(configmap_rules)]),
	array.slice(fixture_release, index_role + 1, count(fixture_release)),
)

rbac3(docs) := of_rule(denies_combined(docs), "RBAC-3")

test_names_scope_role_passes_whole_and_per_document if {
	docs := names_docs(names_rules(names_pinned))
	denies_combined(docs) == set()
	every doc in docs {
		denies_single(doc) == set()
	}
}

test_names_scope_shard_names_follow_the_runtime_derivation if {
	shard_name("cr-checkpoint-runtime", "corp.example/objectstore/audit") == concat("-", [
		"cr-checkpoint-runtime-corp.example.objectstore.audit",
		substring(crypto.sha256("cr-checkpoint-runtime\u0000corp.example/objectstore/audit"), 0, 16),
	])

	# underscores become dashes, runs of dots and dashes collapse into one dash
	startswith(shard_name("a", "t_1/objectstore/f__-.x"), "a-t-1.objectstore.f-x-")
}

test_names_scope_chunk_slots_follow_the_runtime_derivation if {
	chunk_slot_name("cr-checkpoint-runtime-flowlogs-cd439c0c8e2971f1", "b", 12) == "cr-checkpoint-runtime-flowlogs-cd439c0c8e2971f1-cb12"
	count(names_slots) == 32
}

test_names_scope_missing_a_chunk_slot_is_denied if {
	pinned := [name | some name in names_pinned; name != names_slots[15]]
	rbac3(names_docs(names_rules(pinned))) == {concat("", [
		"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra []; missing [get configmaps/",
		names_slots[15], ", update configmaps/", names_slots[15], "]",
	])}
}

test_names_scope_slots_follow_max_chunks if {
	config := json.patch(names_config(names_collectors, "legacy-checkpoints"), [{
		"op": "replace",
		"path": "/data/config.json",
		"value": json.marshal(json.patch(json.unmarshal(names_config(names_collectors, "legacy-checkpoints").data["config.json"]), [{"op": "replace", "path": "/store/maxChunks", "value": 1}])),
	}])
	slots := [chunk_slot_name(shard, generation, 0) | some shard in names_shards; some generation in ["a", "b"]]
	docs := array.concat(
		array.concat(array.slice(fixture_release, 0, index_config), [config, names_role(names_rules(array.concat(array.concat(names_shards, slots), ["legacy-checkpoints"])))]),
		array.slice(fixture_release, index_role + 1, count(fixture_release)),
	)
	denies_combined(docs) == set()
}

test_names_scope_with_list_is_denied if {
	rules := names_rules(names_pinned)
	docs := names_docs(array.concat(rules, [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]))
	rbac3(docs) == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [list configmaps]; missing []"}
}

test_names_scope_pinned_to_a_wrong_name_is_denied if {
	wrong := array.concat(array.slice(names_pinned, 0, count(names_pinned) - 1), ["unrelated-app-config"])
	rbac3(names_docs(names_rules(wrong))) == {concat("", [
		"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [get configmaps/unrelated-app-config, update configmaps/unrelated-app-config]; ",
		"missing [get configmaps/legacy-checkpoints, update configmaps/legacy-checkpoints]",
	])}
}

test_names_scope_missing_a_shard_is_denied if {
	rbac3(names_docs(names_rules(array.slice(names_pinned, 1, count(names_pinned))))) == {concat("", [
		"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra []; missing [get configmaps/",
		names_pinned[0], ", update configmaps/", names_pinned[0], "]",
	])}
}

test_names_scope_unpinned_get_is_denied_per_document if {
	role := names_role([
		{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update"]},
		{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
	])
	of_rule(denies_single(role), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [get configmaps, update configmaps]; missing []"}
}

test_names_scope_pinned_create_is_denied if {
	rules := [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "update", "create"], "resourceNames": names_pinned}]
	denials := rbac3(names_docs(rules))
	count(denials) == 1
	some message in denials
	contains(message, "missing [create configmaps]")
}

test_names_config_with_a_namespace_scope_role_is_denied if {
	docs := names_docs([fixture_role.rules[0]])
	count(rbac3(docs)) == 1
	some message in rbac3(docs)
	contains(message, "extra [get configmaps, list configmaps, update configmaps]")
}

test_namespace_config_with_a_names_scope_role_is_denied if {
	docs := release_with(index_role, names_role(names_rules(names_pinned)))
	count(rbac3(docs)) == 1
	some message in rbac3(docs)
	contains(message, "missing [get configmaps, list configmaps, update configmaps]")
}

test_names_scope_without_collectors_grants_create_only if {
	config := json.patch(names_config([], "x"), [{"op": "replace", "path": "/data/config.json", "value": json.marshal(json.patch(json.unmarshal(names_config([], "x").data["config.json"]), [{"op": "remove", "path": "/store/legacyConfigMap"}]))}])
	docs := array.concat(
		array.concat(array.slice(fixture_release, 0, index_config), [config, names_role([names_rules([])[1]])]),
		array.slice(fixture_release, index_role + 1, count(fixture_release)),
	)
	denies_combined(docs) == set()
}

test_names_scope_null_resource_names_grant_every_name if {
	config := json.patch(names_config([], "x"), [{"op": "replace", "path": "/data/config.json", "value": json.marshal(json.patch(json.unmarshal(names_config([], "x").data["config.json"]), [{"op": "remove", "path": "/store/legacyConfigMap"}]))}])
	null_names := json.patch(names_rules([]), [{"op": "replace", "path": "/0/resourceNames", "value": null}])
	docs := array.concat(
		array.concat(array.slice(fixture_release, 0, index_config), [config, names_role(null_names)]),
		array.slice(fixture_release, index_role + 1, count(fixture_release)),
	)
	rbac3(docs) == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [get configmaps, update configmaps]; missing []"}
}
