# RBAC-3 and RBAC-7 with several leadership buckets (checkpoint.store.buckets): the Role pins the
# store's Lease, each bucket's and each membership slot's, exactly the names the runtime derives.
package main

import rego.v1

buckets_leases := [
	"cr-checkpoint-runtime",
	"cr-checkpoint-runtime-00-of-03",
	"cr-checkpoint-runtime-01-of-03",
	"cr-checkpoint-runtime-02-of-03",
	"cr-checkpoint-runtime-member-00-of-03",
	"cr-checkpoint-runtime-member-01-of-03",
	"cr-checkpoint-runtime-member-02-of-03",
]

# The default release with store.buckets 3 in config.json and the Role pinning `leases`.
buckets_release(leases) := release_with(index_role, json.patch(fixture_role, [{
	"op": "replace", "path": "/rules/1/resourceNames", "value": leases,
}]))

buckets_config := json.patch(fixture_config, [{
	"op": "replace",
	"path": "/data/config.json",
	"value": json.marshal(json.patch(json.unmarshal(fixture_config.data["config.json"]), [
		{"op": "add", "path": "/store/buckets", "value": 3},
	])),
}])

buckets_docs(leases) := array.concat(array.concat(array.slice(buckets_release(leases), 0, index_config), [buckets_config]), array.slice(buckets_release(leases), index_config + 1, count(fixture_release)))

test_buckets_every_lease_pinned_passes if {
	denials := denies_combined(buckets_docs(buckets_leases))
	of_rule(denials, "RBAC-3") == set()
	of_rule(denials, "RBAC-7") == set()
}

test_buckets_a_missing_bucket_lease_is_denied if {
	denials := denies_combined(buckets_docs(array.slice(buckets_leases, 0, 6)))
	"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra []; missing [get leases.coordination.k8s.io/cr-checkpoint-runtime-member-02-of-03, update leases.coordination.k8s.io/cr-checkpoint-runtime-member-02-of-03]" in denials
	count(of_rule(denials, "RBAC-7")) == 1
}

test_buckets_the_one_bucket_role_under_three_buckets_is_denied if {
	denials := denies_combined(buckets_docs(["cr-checkpoint-runtime"]))
	count(of_rule(denials, "RBAC-3")) == 1
	count(of_rule(denials, "RBAC-7")) == 1
}

# Seen alone (no config.json), a Role pinning one store's Leases of several buckets is whole.
test_buckets_a_role_alone_pinning_one_stores_leases_passes if {
	role := json.patch(fixture_role, [{"op": "replace", "path": "/rules/1/resourceNames", "value": buckets_leases}])
	of_rule(denies_combined([role]), "RBAC-3") == set()
}

test_buckets_a_role_alone_pinning_stray_leases_is_denied if {
	role := json.patch(fixture_role, [{"op": "replace", "path": "/rules/1/resourceNames", "value": ["a", "b"]}])
	count(of_rule(denies_combined([role]), "RBAC-3")) == 1
}
