# Values that cannot widen the grant (RBAC-10) and an account the runtime does not share (RBAC-9).
#
# RBAC-10: config.json's store.legacyConfigMap is read by the store and, with rbac.scope=names,
# pinned in the Role's get/update rule. Naming one of the release's own objects would let the pod
# rewrite it: its runtime config (collectors and sink, surviving restarts), a shard or chunk slot
# outside the store's fencing, the Lease's name, any other object the chart renders, or the CA
# bundle every namespace is given. Checked per document (from config.json alone) and, seen whole,
# against every name the chart renders.
#
# RBAC-9: with rbac.create=false or serviceAccount.create=false the runtime runs as an account the
# chart does not own; whatever that account may do, every pod running as it may do too.
package main

import rego.v1

legacy_claims := [{"config_map": cm, "config": config, "legacy": legacy} |
	some cm in objects_of_kind("ConfigMap")
	raw := object.get(cm, ["data", "config.json"], "")
	raw != ""
	config := json.unmarshal(raw)
	legacy := object.get(config, ["store", "legacyConfigMap"], "")
	is_string(legacy)
	legacy != ""
]

# Objects every namespace holds that no workload may be allowed to rewrite.
cluster_owned_config_maps := {"kube-root-ca.crt": "the CA bundle Kubernetes puts in every namespace"}

claim_shards(claim) := {shard_name(lease, collector_namespace(collector)) |
	lease := object.get(claim.config, ["store", "leaseName"], "")
	some collector in object.get(claim.config, "collectors", [])
}

# A chunk slot of a shard: "<shard>-c<a|b><index>".
chunk_slot_of(name, shard) if {
	startswith(name, concat("", [shard, "-c"]))
	regex.match(`^[ab][0-9]+$`, substring(name, count(shard) + 2, -1))
}

# [claim index, why the name is not a legacy ConfigMap]
legacy_refusals contains [i, reason] if {
	some i, claim in legacy_claims
	reason := cluster_owned_config_maps[claim.legacy]
}

legacy_refusals contains [i, "the release's own runtime config"] if {
	some i, claim in legacy_claims
	claim.legacy == object.get(claim.config_map, ["metadata", "name"], "")
}

legacy_refusals contains [i, "the store's Lease"] if {
	some i, claim in legacy_claims
	claim.legacy == object.get(claim.config, ["store", "leaseName"], "")
}

legacy_refusals contains [i, "a shard of this store"] if {
	some i, claim in legacy_claims
	claim.legacy in claim_shards(claim)
}

legacy_refusals contains [i, "a chunk slot of this store"] if {
	some i, claim in legacy_claims
	some shard in claim_shards(claim)
	chunk_slot_of(claim.legacy, shard)
}

legacy_refusals contains [i, concat("", ["the name of ", head.label, ", which the chart renders"])] if {
	combined
	some i, claim in legacy_claims
	some head in heads
	head.name == claim.legacy
}

deny contains msg if {
	some i, claim in legacy_claims
	reasons := {reason | some [j, reason] in legacy_refusals; j == i}
	count(reasons) > 0
	msg := concat("", ["RBAC-10 ", label(claim.config_map), ": store.legacyConfigMap ", claim.legacy, " is ", concat("; ", sort(reasons)), ": the Role would grant update on it; name the previous release's checkpoint ConfigMap, or leave it empty"])
}

# --- RBAC-9: a ServiceAccount shared with other workloads ---------------------------------------

kubernetes_store if {
	some config in runtime_configs
	object.get(config, ["store", "backend"], "kubernetes") == "kubernetes"
}

runtime_accounts := {object.get(pod_spec(obj), "serviceAccountName", "") |
	some obj in pod_objects
	not is_test_hook(obj)
}

warn contains msg if {
	combined
	kubernetes_store
	rendered := {obj.metadata.name | some obj in objects_of_kind("ServiceAccount")}
	some account in runtime_accounts
	not account in rendered
	msg := concat("", ["RBAC-9 ServiceAccount ", account, ": not created by the chart; every workload that runs as it gets the store's ConfigMap and Lease grants, and the runtime gets theirs. Give the runtime an account of its own"])
}

warn contains msg if {
	combined
	kubernetes_store
	count(objects_of_kind("Role")) == 0
	some account in runtime_accounts
	msg := concat("", ["RBAC-9 ServiceAccount ", account, ": the chart renders no Role (rbac.create=false); check that the grants bound to this account are exactly the store's (docs/rbac.md) and that no other workload runs as it"])
}
