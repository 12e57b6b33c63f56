# Hygiene rules: labels, selectors, names, optional objects and the test hook.
package main

import rego.v1

pdb := {
	"apiVersion": "policy/v1",
	"kind": "PodDisruptionBudget",
	"metadata": {"name": "cr-checkpoint-runtime", "namespace": "ns1", "labels": fixture_deployment.metadata.labels},
	"spec": {"maxUnavailable": 1, "selector": {"matchLabels": fixture_deployment.spec.selector.matchLabels}},
}

network_policy := {
	"apiVersion": "networking.k8s.io/v1",
	"kind": "NetworkPolicy",
	"metadata": {"name": "cr-checkpoint-runtime", "namespace": "ns1", "labels": fixture_deployment.metadata.labels},
	"spec": {"podSelector": {"matchLabels": fixture_deployment.spec.selector.matchLabels}, "policyTypes": ["Ingress"]},
}

service_monitor := {
	"apiVersion": "monitoring.coreos.com/v1",
	"kind": "ServiceMonitor",
	"metadata": {"name": "cr-checkpoint-runtime", "namespace": "ns1", "labels": fixture_deployment.metadata.labels},
	"spec": {"selector": {"matchLabels": fixture_deployment.spec.selector.matchLabels}, "endpoints": [{"port": "http"}]},
}

with_optional_objects := array.concat(fixture_release, [pdb, network_policy, service_monitor])

# --- HYG-20: labels ---

test_hyg20_optional_objects_that_select_the_chart_pass if {
	denies_combined(with_optional_objects) == set()
}

test_hyg20_missing_recommended_label_is_denied if {
	docs := release_with(index_service, json.patch(fixture_service, [{"op": "remove", "path": "/metadata/labels/app.kubernetes.io~1managed-by"}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 Service cr-checkpoint-runtime: recommended label app.kubernetes.io/managed-by is missing"}
}

test_hyg20_object_without_labels_is_denied_per_document if {
	config := json.patch(fixture_config, [{"op": "remove", "path": "/metadata/labels"}])
	count(of_rule(denies_single(config), "HYG-20")) == 5
}

test_hyg20_invalid_label_value_is_denied if {
	long := "a-label-value-that-is-much-longer-than-sixty-three-characters-in-total"
	docs := release_with(index_config, json.patch(fixture_config, [{"op": "add", "path": "/metadata/labels/team", "value": long}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 ConfigMap cr-checkpoint-runtime-config: label team=a-label-value-that-is-much-longer-than-sixty-three-characters-in-total is not a valid label value (<= 63 characters, alphanumeric ends)"}
}

# --- HYG-20: names ---

test_hyg20_long_service_name_is_denied if {
	name := "cr-checkpoint-runtime-with-a-service-name-beyond-sixty-three-chars"
	docs := release_with(index_service, json.patch(fixture_service, [{"op": "replace", "path": "/metadata/name", "value": name}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 Service cr-checkpoint-runtime-with-a-service-name-beyond-sixty-three-chars: a Service name must be a DNS-1035 label of at most 63 characters (has 66)"}
}

test_hyg20_invalid_object_name_is_denied if {
	docs := release_with(index_config, json.patch(fixture_config, [{"op": "replace", "path": "/metadata/name", "value": "Config_Map"}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 ConfigMap Config_Map: name must be a DNS-1123 subdomain of at most 253 characters"}
}

test_hyg20_long_port_name_is_denied if {
	docs := release_with(index_deployment, json.patch(fixture_deployment, [{"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/name", "value": "http-metrics-and-health"}]))
	"HYG-20 Deployment cr-checkpoint-runtime: container runtime: port name http-metrics-and-health is longer than 15 characters" in denies_combined(docs)
}

test_hyg20_invalid_container_name_is_denied if {
	docs := release_with(index_deployment, json.patch(fixture_deployment, [{"op": "replace", "path": "/spec/template/spec/containers/0/name", "value": "Runtime"}]))
	"HYG-20 Deployment cr-checkpoint-runtime: container name Runtime must be a DNS-1123 label of at most 63 characters" in denies_combined(docs)
}

# --- HYG-20: selectors ---

test_hyg20_selector_with_extra_label_is_denied if {
	docs := release_with(index_deployment, json.patch(fixture_deployment, [{"op": "add", "path": "/spec/selector/matchLabels/app.kubernetes.io~1version", "value": "0.1.0"}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 Deployment cr-checkpoint-runtime: spec.selector.matchLabels must select on exactly [app.kubernetes.io/instance, app.kubernetes.io/name], has [app.kubernetes.io/instance, app.kubernetes.io/name, app.kubernetes.io/version]"}
}

test_hyg20_service_selector_missing_instance_is_denied if {
	docs := release_with(index_service, json.patch(fixture_service, [{"op": "remove", "path": "/spec/selector/app.kubernetes.io~1instance"}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 Service cr-checkpoint-runtime: spec.selector must select on exactly [app.kubernetes.io/instance, app.kubernetes.io/name], has [app.kubernetes.io/name]"}
}

test_hyg20_match_expressions_are_denied if {
	docs := release_with(index_deployment, json.patch(fixture_deployment, [{"op": "add", "path": "/spec/selector/matchExpressions", "value": [{"key": "tier", "operator": "Exists"}]}]))
	of_rule(denies_combined(docs), "HYG-20") == {"HYG-20 Deployment cr-checkpoint-runtime: spec.selector.matchExpressions widens the selection; use matchLabels name and instance"}
}

test_hyg20_template_without_selected_labels_is_denied if {
	docs := release_with(index_deployment, json.patch(fixture_deployment, [{"op": "remove", "path": "/spec/template/metadata/labels/app.kubernetes.io~1instance"}]))
	"HYG-20 Deployment cr-checkpoint-runtime: pod template labels do not carry spec.selector.matchLabels app.kubernetes.io/instance=cr" in denies_combined(docs)
}

# --- HYG-22: optional objects select the chart's own pods ---

test_hyg22_pdb_selecting_another_release_is_denied if {
	other := json.patch(pdb, [{"op": "replace", "path": "/spec/selector/matchLabels/app.kubernetes.io~1instance", "value": "other"}])
	of_rule(denies_combined(array.concat(fixture_release, [other])), "HYG-22") == {
		"HYG-22 PodDisruptionBudget cr-checkpoint-runtime: spec.selector.matchLabels app.kubernetes.io/instance=other is not the object's own cr",
		"HYG-22 PodDisruptionBudget cr-checkpoint-runtime: spec.selector.matchLabels selects none of the chart's pods",
	}
}

test_hyg22_pdb_selecting_another_release_is_denied_per_document if {
	other := json.patch(pdb, [{"op": "replace", "path": "/spec/selector/matchLabels/app.kubernetes.io~1instance", "value": "other"}])
	of_rule(denies_single(other), "HYG-22") == {"HYG-22 PodDisruptionBudget cr-checkpoint-runtime: spec.selector.matchLabels app.kubernetes.io/instance=other is not the object's own cr"}
}

test_hyg22_network_policy_selecting_nothing_is_denied if {
	# Consistent with its own labels, but the chart's pods carry other values.
	labels := {"app.kubernetes.io/name": "checkpoint-runtime", "app.kubernetes.io/instance": "stale"}
	other := json.patch(network_policy, [
		{"op": "replace", "path": "/spec/podSelector/matchLabels", "value": labels},
		{"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1instance", "value": "stale"},
	])
	of_rule(denies_combined(array.concat(fixture_release, [other])), "HYG-22") == {"HYG-22 NetworkPolicy cr-checkpoint-runtime: spec.podSelector.matchLabels selects none of the chart's pods"}
}

test_hyg22_empty_network_policy_selector_is_denied if {
	other := json.patch(network_policy, [{"op": "replace", "path": "/spec/podSelector", "value": {}}])
	denials := denies_combined(array.concat(fixture_release, [other]))
	"HYG-22 NetworkPolicy cr-checkpoint-runtime: spec.podSelector.matchLabels selects none of the chart's pods" in denials
	"HYG-20 NetworkPolicy cr-checkpoint-runtime: spec.podSelector.matchLabels must select on exactly [app.kubernetes.io/instance, app.kubernetes.io/name], has []" in denials
}

restricted_egress := json.patch(network_policy, [
	{"op": "replace", "path": "/spec/policyTypes", "value": ["Ingress", "Egress"]},
	{"op": "add", "path": "/spec/egress", "value": [
		{"to": [{"ipBlock": {"cidr": "10.96.0.1/32"}}], "ports": [{"port": 443, "protocol": "TCP"}]},
		{"to": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}}], "ports": [{"port": 53, "protocol": "UDP"}]},
	]},
])

test_hyg22_restricted_egress_with_destinations_and_ports_passes if {
	of_rule(denies_combined(array.concat(fixture_release, [restricted_egress])), "HYG-22") == set()
}

test_hyg22_egress_rule_without_destinations_is_denied if {
	open := json.patch(restricted_egress, [{"op": "remove", "path": "/spec/egress/1/to"}])
	of_rule(denies_single(open), "HYG-22") == {"HYG-22 NetworkPolicy cr-checkpoint-runtime: spec.egress[1] has no to, so it allows every destination"}
}

test_hyg22_egress_rule_without_ports_is_denied if {
	open := json.patch(restricted_egress, [{"op": "replace", "path": "/spec/egress/0/ports", "value": []}])
	of_rule(denies_single(open), "HYG-22") == {"HYG-22 NetworkPolicy cr-checkpoint-runtime: spec.egress[0] has no ports, so it allows every port"}
}

test_hyg22_open_egress_without_the_egress_type_is_not_a_restriction if {
	# Without Egress in policyTypes the policy does not restrict egress at all: nothing to check.
	of_rule(denies_single(network_policy), "HYG-22") == set()
}

test_hyg22_service_monitor_selecting_no_service_is_denied if {
	labels := {"app.kubernetes.io/name": "checkpoint-runtime", "app.kubernetes.io/instance": "stale"}
	other := json.patch(service_monitor, [
		{"op": "replace", "path": "/spec/selector/matchLabels", "value": labels},
		{"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1instance", "value": "stale"},
	])
	of_rule(denies_combined(array.concat(fixture_release, [other])), "HYG-22") == {"HYG-22 ServiceMonitor cr-checkpoint-runtime: spec.selector.matchLabels selects none of the chart's Services"}
}

# The chart labels its test pod name=checkpoint-runtime-test, so no selector picks it up; a test
# pod carrying the workload labels would join the Service while it runs.
test_hyg22_test_pod_matching_the_service_selector_warns if {
	of_rule(warns_combined(fixture_release), "HYG-22") == set()
	pod := json.patch(fixture_test_pod, [{"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "checkpoint-runtime"}])
	of_rule(warns_combined(release_with(index_test_pod, pod)), "HYG-22") == {"HYG-22 Pod cr-checkpoint-runtime-test: the test pod matches the selector of Service cr-checkpoint-runtime"}
}

# --- HYG-23: the test hook ---

test_hyg23_bare_pod_without_hook_is_denied if {
	pod := json.patch(fixture_test_pod, [{"op": "remove", "path": "/metadata/annotations/helm.sh~1hook"}])
	denials := denies_combined(release_with(index_test_pod, pod))
	"HYG-23 Pod cr-checkpoint-runtime-test: a bare Pod must be a helm.sh/hook: test" in denials

	# no longer a hook pod, so it is held to the workload rules as well
	"POD-15 Pod cr-checkpoint-runtime-test: container healthz: livenessProbe must be set" in denials
}

test_hyg23_test_hook_without_delete_policy_is_denied if {
	pod := json.patch(fixture_test_pod, [{"op": "remove", "path": "/metadata/annotations/helm.sh~1hook-delete-policy"}])
	of_rule(denies_single(pod), "HYG-23") == {"HYG-23 Pod cr-checkpoint-runtime-test: the test hook needs a helm.sh/hook-delete-policy"}
}

test_hyg23_restarting_test_pod_is_denied if {
	pod := json.patch(fixture_test_pod, [{"op": "remove", "path": "/spec/restartPolicy"}])
	of_rule(denies_single(pod), "HYG-23") == {"HYG-23 Pod cr-checkpoint-runtime-test: a test pod must not restart (restartPolicy Never or OnFailure)"}
}

test_hyg23_hook_list_with_test_is_recognised if {
	pod := json.patch(fixture_test_pod, [{"op": "replace", "path": "/metadata/annotations/helm.sh~1hook", "value": "post-install, test"}])
	is_test_hook(pod)
}

# --- HYG-20: pod template labels ---

test_hyg20_invalid_pod_template_label_is_denied_per_document if {
	deployment := json.patch(fixture_deployment, [{"op": "add", "path": "/spec/template/metadata/labels/team", "value": "-bad-"}])
	"HYG-20 Deployment cr-checkpoint-runtime: pod template label team=-bad- is not a valid label value" in denies_single(deployment)
}
