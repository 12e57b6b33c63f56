# Pod security rules: failing variants of the Deployment, its init containers and the test pod.
package main

import rego.v1

patched_deployment(ops) := release_with(index_deployment, json.patch(fixture_deployment, ops))

patched_test_pod(ops) := release_with(index_test_pod, json.patch(fixture_test_pod, ops))

deployment_denies(ops, rule_id) := of_rule(denies_combined(patched_deployment(ops)), rule_id)

# --- POD-11 ---

test_pod11_root_user_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/securityContext/runAsUser", "value": 0}], "POD-11") == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: runAsUser must be set to a non-zero UID"}
}

test_pod11_container_root_override_is_denied if {
	deployment_denies([{"op": "add", "path": "/spec/template/spec/containers/0/securityContext/runAsUser", "value": 0}], "POD-11") == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: runAsUser must be set to a non-zero UID"}
}

test_pod11_missing_uid_is_denied if {
	deployment_denies([{"op": "remove", "path": "/spec/template/spec/securityContext/runAsUser"}], "POD-11") == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: runAsUser must be set to a non-zero UID"}
}

test_pod11_run_as_non_root_false_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/runAsNonRoot", "value": false}], "POD-11") == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: runAsNonRoot must be true"}
}

test_pod11_run_as_non_root_is_inherited_from_the_pod if {
	deployment_denies([{"op": "remove", "path": "/spec/template/spec/containers/0/securityContext/runAsNonRoot"}], "POD-11") == set()
}

test_pod11_run_as_non_root_missing_everywhere_is_denied if {
	deployment_denies(
		[
			{"op": "remove", "path": "/spec/template/spec/containers/0/securityContext/runAsNonRoot"},
			{"op": "remove", "path": "/spec/template/spec/securityContext/runAsNonRoot"},
		],
		"POD-11",
	) == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: runAsNonRoot must be true"}
}

test_pod11_unconfined_seccomp_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/seccompProfile/type", "value": "Unconfined"}], "POD-11") == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: seccompProfile.type must be RuntimeDefault"}
}

test_pod11_missing_seccomp_is_denied if {
	deployment_denies(
		[
			{"op": "remove", "path": "/spec/template/spec/containers/0/securityContext/seccompProfile"},
			{"op": "remove", "path": "/spec/template/spec/securityContext/seccompProfile"},
		],
		"POD-11",
	) == {"POD-11 Deployment cr-checkpoint-runtime: container runtime: seccompProfile.type must be RuntimeDefault"}
}

test_pod11_test_pod_root_is_denied if {
	docs := patched_test_pod([{"op": "replace", "path": "/spec/securityContext/runAsUser", "value": 0}])
	of_rule(denies_combined(docs), "POD-11") == {"POD-11 Pod cr-checkpoint-runtime-test: container healthz: runAsUser must be set to a non-zero UID"}
}

# --- POD-12 ---

test_pod12_privileged_container_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/privileged", "value": true}], "POD-12") == {"POD-12 Deployment cr-checkpoint-runtime: container runtime: privileged must not be true"}
}

test_pod12_privilege_escalation_is_denied if {
	deployment_denies([{"op": "remove", "path": "/spec/template/spec/containers/0/securityContext/allowPrivilegeEscalation"}], "POD-12") == {"POD-12 Deployment cr-checkpoint-runtime: container runtime: allowPrivilegeEscalation must be false"}
}

test_pod12_writable_root_filesystem_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/readOnlyRootFilesystem", "value": false}], "POD-12") == {"POD-12 Deployment cr-checkpoint-runtime: container runtime: readOnlyRootFilesystem must be true"}
}

test_pod12_capabilities_not_dropped_are_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/securityContext/capabilities/drop", "value": ["NET_RAW"]}], "POD-12") == {"POD-12 Deployment cr-checkpoint-runtime: container runtime: capabilities.drop must contain ALL"}
}

test_pod12_added_capabilities_are_denied if {
	deployment_denies([{"op": "add", "path": "/spec/template/spec/containers/0/securityContext/capabilities/add", "value": ["NET_ADMIN", "SYS_TIME"]}], "POD-12") == {"POD-12 Deployment cr-checkpoint-runtime: container runtime: capabilities.add must be empty, has [NET_ADMIN, SYS_TIME]"}
}

test_pod12_unmasked_proc_mount_is_denied if {
	deployment_denies([{"op": "add", "path": "/spec/template/spec/containers/0/securityContext/procMount", "value": "Unmasked"}], "POD-12") == {"POD-12 Deployment cr-checkpoint-runtime: container runtime: procMount must be Default"}
}

test_pod12_init_container_without_hardening_is_denied if {
	init := {"name": "migrate", "image": "checkpoint-runtime:0.1.0", "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}}}
	deployment_denies([{"op": "add", "path": "/spec/template/spec/initContainers", "value": [init]}], "POD-12") == {
		"POD-12 Deployment cr-checkpoint-runtime: container migrate: allowPrivilegeEscalation must be false",
		"POD-12 Deployment cr-checkpoint-runtime: container migrate: readOnlyRootFilesystem must be true",
		"POD-12 Deployment cr-checkpoint-runtime: container migrate: capabilities.drop must contain ALL",
	}
}

test_pod12_hardened_init_container_passes if {
	init := json.patch(fixture_deployment.spec.template.spec.containers[0], [
		{"op": "replace", "path": "/name", "value": "migrate"},
		{"op": "remove", "path": "/livenessProbe"},
		{"op": "remove", "path": "/readinessProbe"},
	])
	count(denies_combined(patched_deployment([{"op": "add", "path": "/spec/template/spec/initContainers", "value": [init]}]))) == 0
}

test_pod12_test_pod_writable_root_is_denied if {
	docs := patched_test_pod([{"op": "replace", "path": "/spec/containers/0/securityContext/readOnlyRootFilesystem", "value": false}])
	of_rule(denies_combined(docs), "POD-12") == {"POD-12 Pod cr-checkpoint-runtime-test: container healthz: readOnlyRootFilesystem must be true"}
}

# --- POD-13 ---

test_pod13_host_namespaces_are_denied if {
	deployment_denies(
		[
			{"op": "add", "path": "/spec/template/spec/hostNetwork", "value": true},
			{"op": "add", "path": "/spec/template/spec/hostPID", "value": true},
			{"op": "add", "path": "/spec/template/spec/hostIPC", "value": true},
		],
		"POD-13",
	) == {
		"POD-13 Deployment cr-checkpoint-runtime: hostNetwork shares a host namespace",
		"POD-13 Deployment cr-checkpoint-runtime: hostPID shares a host namespace",
		"POD-13 Deployment cr-checkpoint-runtime: hostIPC shares a host namespace",
	}
}

test_pod13_host_port_is_denied if {
	deployment_denies([{"op": "add", "path": "/spec/template/spec/containers/0/ports/0/hostPort", "value": 8080}], "POD-13") == {"POD-13 Deployment cr-checkpoint-runtime: container runtime: hostPort 8080 binds a port on the node"}
}

test_pod13_host_path_is_denied if {
	denials := denies_combined(patched_deployment([{"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "root", "hostPath": {"path": "/"}}}]))
	of_rule(denials, "POD-13") == {"POD-13 Deployment cr-checkpoint-runtime: volume root mounts a hostPath"}
	of_rule(denials, "POD-15") == {"POD-15 Deployment cr-checkpoint-runtime: volume root uses the hostPath source; allowed: configMap, emptyDir, persistentVolumeClaim, projected, secret"}
}

# --- POD-14 ---

test_pod14_default_service_account_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/serviceAccountName", "value": "default"}], "POD-14") == {
		"POD-14 Deployment cr-checkpoint-runtime: runs as the namespace's default ServiceAccount; use the chart's own",
		"POD-14 Deployment cr-checkpoint-runtime: ServiceAccount default is not the one the chart renders [cr-checkpoint-runtime]",
	}
}

test_pod14_missing_service_account_is_denied_per_document if {
	deployment := json.patch(fixture_deployment, [{"op": "remove", "path": "/spec/template/spec/serviceAccountName"}])
	of_rule(denies_single(deployment), "POD-14") == {"POD-14 Deployment cr-checkpoint-runtime: runs as the namespace's default ServiceAccount; use the chart's own"}
}

test_pod14_test_pod_with_token_is_denied if {
	docs := patched_test_pod([{"op": "remove", "path": "/spec/automountServiceAccountToken"}])
	of_rule(denies_combined(docs), "POD-14") == {"POD-14 Pod cr-checkpoint-runtime-test: the test pod does not use the API; set automountServiceAccountToken: false"}
}

test_pod14_file_store_with_token_warns if {
	config := json.patch(fixture_config, [{"op": "replace", "path": "/data/config.json", "value": "{\"store\": {\"backend\": \"file\", \"path\": \"/data\"}}"}])
	deployment := json.patch(fixture_deployment, [{"op": "replace", "path": "/spec/template/spec/automountServiceAccountToken", "value": true}])
	docs := [fixture_service_account, config, fixture_service, deployment, fixture_test_pod]
	"POD-14 Deployment cr-checkpoint-runtime: the file store does not use the API; set automountServiceAccountToken: false" in warns_combined(docs)
}

test_pod14_file_store_without_token_does_not_warn if {
	config := json.patch(fixture_config, [{"op": "replace", "path": "/data/config.json", "value": "{\"store\": {\"backend\": \"file\", \"path\": \"/data\"}}"}])
	deployment := json.patch(fixture_deployment, [{"op": "replace", "path": "/spec/template/spec/automountServiceAccountToken", "value": false}])
	docs := [fixture_service_account, config, fixture_service, deployment, fixture_test_pod]
	of_rule(warns_combined(docs), "POD-14") == set()
}

test_pod14_automounted_token_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/automountServiceAccountToken", "value": true}], "POD-14") == {"POD-14 Deployment cr-checkpoint-runtime: mounts the automatically injected token, which the API server may extend to a year; set automountServiceAccountToken: false and mount a projected serviceAccountToken with expirationSeconds"}
	deployment_denies([{"op": "remove", "path": "/spec/template/spec/automountServiceAccountToken"}], "POD-14") != set()
}

test_pod14_default_projected_token_passes if {
	deployment_denies([], "POD-14") == set()
}

test_pod14_long_lived_projected_token_is_denied if {
	volumes := fixture_deployment.spec.template.spec.volumes
	some i, volume in volumes
	volume.name == "kube-api-access"
	path := concat("", ["/spec/template/spec/volumes/", format_int(i, 10), "/projected/sources/0/serviceAccountToken/expirationSeconds"])
	deployment_denies([{"op": "replace", "path": path, "value": 172800}], "POD-14") == {"POD-14 Deployment cr-checkpoint-runtime: volume kube-api-access: a projected token of 172800 s outlives a day; use at most 86400 (serviceAccount.tokenExpirationSeconds)"}
}

# --- POD-15 ---

test_pod15_latest_tag_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "registry.example:5000/checkpoint-runtime:latest"}], "POD-15") == {"POD-15 Deployment cr-checkpoint-runtime: container runtime: image registry.example:5000/checkpoint-runtime:latest uses the moving tag latest"}
}

test_pod15_untagged_image_is_denied if {
	deployment_denies([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "registry.example:5000/checkpoint-runtime"}], "POD-15") == {"POD-15 Deployment cr-checkpoint-runtime: container runtime: image registry.example:5000/checkpoint-runtime has no tag or digest"}
}

test_pod15_digest_pinned_image_passes_without_warning if {
	docs := patched_deployment([{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "checkpoint-runtime@sha256:0000000000000000000000000000000000000000000000000000000000000000"}])
	of_rule(denies_combined(docs), "POD-15") == set()
	not "POD-15 Deployment cr-checkpoint-runtime: container runtime: image checkpoint-runtime:0.1.0 is pinned by tag only; a digest cannot move" in warns_combined(docs)
	count(of_rule(warns_combined(docs), "POD-15")) == 1
}

test_pod15_missing_resources_are_denied if {
	deployment_denies([{"op": "remove", "path": "/spec/template/spec/containers/0/resources"}], "POD-15") == {
		"POD-15 Deployment cr-checkpoint-runtime: container runtime: resources.requests.cpu must be set",
		"POD-15 Deployment cr-checkpoint-runtime: container runtime: resources.requests.memory must be set",
		"POD-15 Deployment cr-checkpoint-runtime: container runtime: resources.limits.memory must be set",
	}
}

test_pod15_missing_cpu_limit_only_warns if {
	docs := patched_deployment([{"op": "remove", "path": "/spec/template/spec/containers/0/resources/limits/cpu"}])
	of_rule(denies_combined(docs), "POD-15") == set()
	"POD-15 Deployment cr-checkpoint-runtime: container runtime: resources.limits.cpu is not set" in warns_combined(docs)
}

test_pod15_test_pod_without_resources_is_denied if {
	docs := patched_test_pod([{"op": "remove", "path": "/spec/containers/0/resources/requests"}])
	of_rule(denies_combined(docs), "POD-15") == {
		"POD-15 Pod cr-checkpoint-runtime-test: container healthz: resources.requests.cpu must be set",
		"POD-15 Pod cr-checkpoint-runtime-test: container healthz: resources.requests.memory must be set",
	}
}

test_pod15_missing_probes_are_denied if {
	deployment_denies(
		[
			{"op": "remove", "path": "/spec/template/spec/containers/0/livenessProbe"},
			{"op": "remove", "path": "/spec/template/spec/containers/0/readinessProbe"},
		],
		"POD-15",
	) == {
		"POD-15 Deployment cr-checkpoint-runtime: container runtime: livenessProbe must be set",
		"POD-15 Deployment cr-checkpoint-runtime: container runtime: readinessProbe must be set",
	}
}

test_pod15_test_pod_needs_no_probes if {
	object.get(fixture_test_pod.spec.containers[0], "livenessProbe", null) == null
	of_rule(denies_combined(fixture_release), "POD-15") == set()
}

test_pod15_unlisted_volume_type_is_denied if {
	deployment_denies([{"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "info", "downwardAPI": {"items": []}}}], "POD-15") == {"POD-15 Deployment cr-checkpoint-runtime: volume info uses the downwardAPI source; allowed: configMap, emptyDir, persistentVolumeClaim, projected, secret"}
}

test_pod15_claim_for_the_file_store_passes if {
	deployment_denies([{"op": "add", "path": "/spec/template/spec/volumes/-", "value": {"name": "data", "persistentVolumeClaim": {"claimName": "checkpoints"}}}], "POD-15") == set()
}
