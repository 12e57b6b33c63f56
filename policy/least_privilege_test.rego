# RBAC-10 (a legacy ConfigMap that names the release's own objects) and RBAC-9 (a shared account).
package main

import rego.v1

# The names-scope release of rbac_names_test.rego with this legacy ConfigMap, pinned in the Role.
legacy_docs(legacy) := array.concat(
	array.concat(array.slice(fixture_release, 0, index_config), [names_config(names_collectors, legacy), names_role(names_rules(array.concat(array.slice(names_pinned, 0, count(names_pinned) - 1), [legacy])))]),
	array.slice(fixture_release, index_role + 1, count(fixture_release)),
)

rbac10_combined(legacy) := of_rule(denies_combined(legacy_docs(legacy)), "RBAC-10")

rbac10_single(legacy) := of_rule(denies_single(names_config(names_collectors, legacy)), "RBAC-10")

refused_for(legacy, reason) if {
	some message in rbac10_combined(legacy)
	contains(message, concat("", ["store.legacyConfigMap ", legacy, " is "]))
	contains(message, reason)
}

test_a_previous_release_config_map_passes if {
	rbac10_combined("legacy-checkpoints") == set()
	rbac10_single("legacy-checkpoints") == set()
	denies_combined(legacy_docs("legacy-checkpoints")) == set()
}

test_the_release_config_is_refused_whole_and_alone if {
	refused_for("cr-checkpoint-runtime-config", "the release's own runtime config")
	count(rbac10_single("cr-checkpoint-runtime-config")) == 1
}

test_the_ca_bundle_is_refused if {
	refused_for("kube-root-ca.crt", "the CA bundle Kubernetes puts in every namespace")
	count(rbac10_single("kube-root-ca.crt")) == 1
}

test_the_lease_name_is_refused if {
	refused_for(names_lease, "the store's Lease")
}

test_a_shard_of_the_store_is_refused if {
	shard := shard_name(names_lease, "flowlogs")
	refused_for(shard, "a shard of this store")
	count(rbac10_single(shard)) == 1
}

test_a_chunk_slot_of_the_store_is_refused if {
	slot := concat("", [shard_name(names_lease, "corp.example/objectstore/audit"), "-cb12"])
	refused_for(slot, "a chunk slot of this store")
	count(rbac10_single(slot)) == 1
}

test_a_name_that_only_starts_like_a_slot_passes if {
	rbac10_single(concat("", [shard_name(names_lease, "flowlogs"), "-cz1"])) == set()
	rbac10_single(concat("", [shard_name(names_lease, "flowlogs"), "-ca"])) == set()
}

test_any_name_the_chart_renders_is_refused_when_seen_whole if {
	# the test pod's name is not derived from config.json: only the whole release shows it
	refused_for("cr-checkpoint-runtime-test", "the name of Pod cr-checkpoint-runtime-test, which the chart renders")
	rbac10_single("cr-checkpoint-runtime-test") == set()
}

test_an_empty_legacy_config_map_is_no_claim if {
	rbac10_single("") == set()
}

# --- RBAC-9 ---------------------------------------------------------------------------------------

rbac9(docs) := of_rule(warns_combined(docs), "RBAC-9")

test_the_chart_own_account_and_role_do_not_warn if {
	rbac9(fixture_release) == set()
}

test_an_existing_account_warns if {
	docs := release_without(index_service_account)
	rbac9(docs) == {"RBAC-9 ServiceAccount cr-checkpoint-runtime: not created by the chart; every workload that runs as it gets the store's ConfigMap and Lease grants, and the runtime gets theirs. Give the runtime an account of its own"}
}

test_no_role_warns if {
	docs := array.concat(array.slice(fixture_release, 0, index_role), array.slice(fixture_release, index_role_binding + 1, count(fixture_release)))
	messages := rbac9(docs)
	count(messages) == 1
	some message in messages
	contains(message, "the chart renders no Role (rbac.create=false)")
}

test_the_file_store_does_not_warn if {
	file_config := json.patch(fixture_config, [{
		"op": "replace",
		"path": "/data/config.json",
		"value": json.marshal(json.patch(json.unmarshal(fixture_config.data["config.json"]), [{"op": "replace", "path": "/store/backend", "value": "file"}])),
	}])
	docs := release_with(index_config, file_config)
	rbac9(array.slice(docs, 1, count(docs))) == set()
}

test_a_single_document_does_not_warn if {
	rbac9(fixture_release) == set()
	of_rule(warns_single(fixture_deployment), "RBAC-9") == set()
}
