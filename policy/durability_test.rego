# Durability advisories: the file store's folder on an emptyDir warns, on a claim it does not.
package main

import rego.v1

file_store_config := json.patch(fixture_config, [{"op": "replace", "path": "/data/config.json", "value": "{\"store\": {\"backend\": \"file\", \"path\": \"/var/lib/checkpoint-runtime\"}}"}])

file_store_release(source) := [fixture_service_account, file_store_config, fixture_service, deployment, fixture_test_pod] if {
	deployment := json.patch(fixture_deployment, [
		{"op": "add", "path": "/spec/template/spec/volumes/-", "value": object.union({"name": "checkpoints"}, source)},
		{"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-", "value": {"name": "checkpoints", "mountPath": "/var/lib/checkpoint-runtime"}},
	])
}

test_store1_file_store_on_an_empty_dir_warns if {
	of_rule(warns_combined(file_store_release({"emptyDir": {}})), "STORE-1") == {"STORE-1 Deployment cr-checkpoint-runtime: the file store's folder /var/lib/checkpoint-runtime is on the emptyDir volume checkpoints, deleted with the pod: checkpoints do not survive a restart or reschedule; use a PersistentVolumeClaim (checkpoint.file.existingClaim)"}
}

test_store1_file_store_on_a_claim_does_not_warn if {
	of_rule(warns_combined(file_store_release({"persistentVolumeClaim": {"claimName": "data"}})), "STORE-1") == set()
}

test_store1_empty_dir_not_at_the_store_folder_does_not_warn if {
	# The default release mounts emptyDir /tmp; the kubernetes store keeps no folder at all.
	of_rule(warns_combined(fixture_release), "STORE-1") == set()
	docs := release_with(index_config, file_store_config)
	of_rule(warns_combined(docs), "STORE-1") == set()
}

test_store1_needs_the_release_seen_whole if {
	every doc in file_store_release({"emptyDir": {}}) {
		of_rule(warns_single(doc), "STORE-1") == set()
	}
}
