# RBAC rules: each deny has a passing default (release_test.rego) and failing variants here.
package main

import rego.v1

role_name := "cr-checkpoint-runtime"

patched_role(ops) := release_with(index_role, json.patch(fixture_role, ops))

patched_binding(ops) := release_with(index_role_binding, json.patch(fixture_role_binding, ops))

add_configmap_verb(verb) := patched_role([{"op": "add", "path": "/rules/0/verbs/-", "value": verb}])

cluster_role := {
	"apiVersion": "rbac.authorization.k8s.io/v1",
	"kind": "ClusterRole",
	"metadata": {"name": "cr-reader", "labels": fixture_role.metadata.labels},
	"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
}

# --- RBAC-1 ---

test_rbac1_cluster_role_is_denied if {
	denials := denies_combined(array.concat(fixture_release, [cluster_role]))
	of_rule(denials, "RBAC-1") == {"RBAC-1 ClusterRole cr-reader: cluster-scoped RBAC is never rendered"}
}

test_rbac1_cluster_role_binding_is_denied_per_document if {
	binding := json.patch(fixture_role_binding, [
		{"op": "replace", "path": "/kind", "value": "ClusterRoleBinding"},
		{"op": "remove", "path": "/metadata/namespace"},
	])
	"RBAC-1 ClusterRoleBinding cr-checkpoint-runtime: cluster-scoped RBAC is never rendered" in denies_single(binding)
}

# --- RBAC-2 ---

test_rbac2_role_without_namespace_is_denied if {
	docs := patched_role([{"op": "remove", "path": "/metadata/namespace"}])
	"RBAC-2 Role cr-checkpoint-runtime: metadata.namespace must be set explicitly to the coordination namespace" in denies_combined(docs)
}

test_rbac2_binding_without_namespace_is_denied_per_document if {
	binding := json.patch(fixture_role_binding, [{"op": "remove", "path": "/metadata/namespace"}])
	"RBAC-2 RoleBinding cr-checkpoint-runtime: metadata.namespace must be set explicitly to the coordination namespace" in denies_single(binding)
}

test_rbac2_role_outside_the_coordination_namespace_is_denied if {
	docs := patched_role([{"op": "replace", "path": "/metadata/namespace", "value": "elsewhere"}])
	denials := of_rule(denies_combined(docs), "RBAC-2")
	denials == {
		"RBAC-2 Role cr-checkpoint-runtime: namespace elsewhere is not the coordination namespace ns1 of config.json",
		"RBAC-2 RoleBinding cr-checkpoint-runtime: namespace ns1 differs from its Role's elsewhere",
	}
}

# --- RBAC-3: set equality, in both directions ---

test_rbac2_role_in_kube_system_is_denied_per_document if {
	role := json.patch(fixture_role, [{"op": "replace", "path": "/metadata/namespace", "value": "kube-system"}])
	of_rule(denies_single(role), "RBAC-2") == {"RBAC-2 Role cr-checkpoint-runtime: namespace kube-system belongs to the cluster, not to the chart"}
}

test_rbac2_binding_in_kube_public_is_denied_per_document if {
	binding := json.patch(fixture_role_binding, [{"op": "replace", "path": "/metadata/namespace", "value": "kube-public"}])
	of_rule(denies_single(binding), "RBAC-2") == {"RBAC-2 RoleBinding cr-checkpoint-runtime: namespace kube-public belongs to the cluster, not to the chart"}
}

test_rbac3_extra_delete_verb_is_denied if {
	of_rule(denies_combined(add_configmap_verb("delete")), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [delete configmaps]; missing []"}
}

test_rbac3_extra_watch_verb_is_denied_per_document if {
	role := json.patch(fixture_role, [{"op": "add", "path": "/rules/0/verbs/-", "value": "watch"}])
	of_rule(denies_single(role), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [watch configmaps]; missing []"}
}

test_rbac3_extra_patch_verb_is_denied if {
	of_rule(denies_combined(add_configmap_verb("patch")), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [patch configmaps]; missing []"}
}

test_rbac3_missing_verb_is_denied if {
	docs := patched_role([{"op": "replace", "path": "/rules/0/verbs", "value": ["get", "update", "create"]}])
	of_rule(denies_combined(docs), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra []; missing [list configmaps]"}
}

test_rbac3_extra_resource_is_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/0/resources/-", "value": "events"}])
	of_rule(denies_combined(docs), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [create events, get events, list events, update events]; missing []"}
}

test_rbac3_configmaps_pinned_by_name_is_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/0/resourceNames", "value": ["one"]}])
	of_rule(denies_combined(docs), "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [create configmaps/one, get configmaps/one, list configmaps/one, update configmaps/one]; missing [create configmaps, get configmaps, list configmaps, update configmaps]"}
}

test_rbac3_regrouped_rules_with_the_same_permissions_pass if {
	docs := patched_role([{"op": "replace", "path": "/rules/0", "value": {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}}, {"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["update", "create"]}}])
	of_rule(denies_combined(docs), "RBAC-3") == set()
}

# --- RBAC-4 ---

test_rbac4_wildcard_verb_is_denied if {
	denials := denies_combined(add_configmap_verb("*"))
	of_rule(denials, "RBAC-4") == {"RBAC-4 Role cr-checkpoint-runtime: rules[0].verbs contains the wildcard *"}
	count(of_rule(denials, "RBAC-3")) == 1
}

test_rbac4_wildcard_resource_and_group_are_denied if {
	docs := patched_role([
		{"op": "replace", "path": "/rules/0/resources", "value": ["*"]},
		{"op": "replace", "path": "/rules/0/apiGroups", "value": ["*"]},
	])
	of_rule(denies_combined(docs), "RBAC-4") == {
		"RBAC-4 Role cr-checkpoint-runtime: rules[0].resources contains the wildcard *",
		"RBAC-4 Role cr-checkpoint-runtime: rules[0].apiGroups contains the wildcard *",
	}
}

test_rbac4_wildcard_resource_name_is_denied if {
	docs := patched_role([{"op": "replace", "path": "/rules/1/resourceNames", "value": ["cr-*"]}])
	"RBAC-4 Role cr-checkpoint-runtime: rules[1].resourceNames contains the wildcard cr-*" in denies_combined(docs)
}

test_rbac4_non_resource_urls_are_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/-", "value": {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}}])
	"RBAC-4 Role cr-checkpoint-runtime: rules[3] grants nonResourceURLs" in denies_combined(docs)
}

test_rbac4_aggregation_rule_is_denied if {
	aggregated := json.patch(cluster_role, [{"op": "add", "path": "/aggregationRule", "value": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate-to-view": "true"}}]}}])
	of_rule(denies_single(aggregated), "RBAC-4") == {"RBAC-4 ClusterRole cr-reader: aggregationRule pulls in rules the chart does not list"}
}

test_rbac4_non_resource_urls_of_a_cluster_role_are_denied_per_document if {
	urls := json.patch(cluster_role, [{"op": "replace", "path": "/rules/0", "value": {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}}])
	of_rule(denies_single(urls), "RBAC-4") == {"RBAC-4 ClusterRole cr-reader: rules[0] grants nonResourceURLs"}
}

# --- RBAC-5 ---

test_rbac5_secrets_access_is_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}}])
	denials := denies_combined(docs)
	of_rule(denials, "RBAC-5") == {"RBAC-5 Role cr-checkpoint-runtime: rules[3] grants access to the forbidden resource secrets"}
	of_rule(denials, "RBAC-3") == {"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [get secrets]; missing []"}
}

test_rbac5_pods_exec_is_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["pods", "pods/exec"], "verbs": ["create"]}}])
	of_rule(denies_combined(docs), "RBAC-5") == {
		"RBAC-5 Role cr-checkpoint-runtime: rules[3] grants access to the forbidden resource pods",
		"RBAC-5 Role cr-checkpoint-runtime: rules[3] grants access to the forbidden resource pods/exec",
	}
}

test_rbac5_rolebindings_are_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/-", "value": {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["rolebindings"], "verbs": ["create"]}}])
	"RBAC-5 Role cr-checkpoint-runtime: rules[3] grants access to the forbidden resource rolebindings" in denies_combined(docs)
}

# --- RBAC-6 ---

test_rbac6_escalation_verbs_are_denied if {
	docs := patched_role([{"op": "add", "path": "/rules/-", "value": {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind", "escalate"]}}, {"op": "add", "path": "/rules/-", "value": {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"]}}])
	of_rule(denies_combined(docs), "RBAC-6") == {
		"RBAC-6 Role cr-checkpoint-runtime: rules[3] grants the escalation verb bind",
		"RBAC-6 Role cr-checkpoint-runtime: rules[3] grants the escalation verb escalate",
		"RBAC-6 Role cr-checkpoint-runtime: rules[4] grants the escalation verb impersonate",
	}
}

# --- RBAC-7 ---

test_rbac7_unpinned_lease_rule_is_denied if {
	docs := patched_role([{"op": "remove", "path": "/rules/1/resourceNames"}])
	denials := denies_combined(docs)
	of_rule(denials, "RBAC-7") == {
		"RBAC-7 Role cr-checkpoint-runtime: rules[1] grants leases get on every name; pin it by resourceNames to the Lease",
		"RBAC-7 Role cr-checkpoint-runtime: rules[1] grants leases update on every name; pin it by resourceNames to the Lease",
		"RBAC-7 Role cr-checkpoint-runtime: pins Lease [] but config.json's leaseName and buckets give [cr-checkpoint-runtime]",
	}
	count(of_rule(denials, "RBAC-3")) == 1
}

test_rbac7_unpinned_lease_rule_is_denied_per_document if {
	role := json.patch(fixture_role, [{"op": "remove", "path": "/rules/1/resourceNames"}])
	count(of_rule(denies_single(role), "RBAC-7")) == 2
}

test_rbac7_create_mixed_into_the_pinned_rule_is_denied if {
	docs := patched_role([
		{"op": "add", "path": "/rules/1/verbs/-", "value": "create"},
		{"op": "remove", "path": "/rules/2"},
	])
	of_rule(denies_combined(docs), "RBAC-7") == {
		"RBAC-7 Role cr-checkpoint-runtime: rules[1] mixes leases create with [get, update]; create needs its own rule",
		"RBAC-7 Role cr-checkpoint-runtime: rules[1] pins leases create by name, which RBAC never matches (create has no name at authorization time)",
	}
}

test_rbac7_lease_name_differs_from_config_is_denied if {
	docs := patched_role([{"op": "replace", "path": "/rules/1/resourceNames", "value": ["other-lease"]}])
	denials := denies_combined(docs)
	"RBAC-7 Role cr-checkpoint-runtime: pins Lease [other-lease] but config.json's leaseName and buckets give [cr-checkpoint-runtime]" in denials
	"RBAC-3 Role cr-checkpoint-runtime: rules differ from the store's permissions: extra [get leases.coordination.k8s.io/other-lease, update leases.coordination.k8s.io/other-lease]; missing [get leases.coordination.k8s.io/cr-checkpoint-runtime, update leases.coordination.k8s.io/cr-checkpoint-runtime]" in denials
}

test_rbac7_lease_name_is_checked_against_config_only_when_combined if {
	role := json.patch(fixture_role, [{"op": "replace", "path": "/rules/1/resourceNames", "value": ["other-lease"]}])
	denies_single(role) == set()
}

# --- RBAC-8 ---

test_rbac8_binding_to_cluster_admin_is_denied if {
	docs := patched_binding([{"op": "replace", "path": "/roleRef", "value": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}}])
	of_rule(denies_combined(docs), "RBAC-8") == {
		"RBAC-8 RoleBinding cr-checkpoint-runtime: roleRef.kind is ClusterRole; only the chart's namespaced Role may be bound",
		"RBAC-8 RoleBinding cr-checkpoint-runtime: binds the built-in role cluster-admin",
		"RBAC-8 RoleBinding cr-checkpoint-runtime: roleRef cluster-admin is not a Role this chart renders",
	}
}

test_rbac8_binding_to_a_system_role_is_denied_per_document if {
	binding := json.patch(fixture_role_binding, [{"op": "replace", "path": "/roleRef/name", "value": "system:controller:foo"}])
	of_rule(denies_single(binding), "RBAC-8") == {"RBAC-8 RoleBinding cr-checkpoint-runtime: binds the built-in role system:controller:foo"}
}

test_rbac8_binding_to_a_foreign_role_is_denied_when_combined if {
	docs := patched_binding([{"op": "replace", "path": "/roleRef/name", "value": "someone-elses-role"}])
	of_rule(denies_combined(docs), "RBAC-8") == {"RBAC-8 RoleBinding cr-checkpoint-runtime: roleRef someone-elses-role is not a Role this chart renders"}
}

test_rbac8_wrong_role_ref_api_group_is_denied if {
	docs := patched_binding([{"op": "replace", "path": "/roleRef/apiGroup", "value": "example.com"}])
	of_rule(denies_combined(docs), "RBAC-8") == {"RBAC-8 RoleBinding cr-checkpoint-runtime: roleRef.apiGroup must be rbac.authorization.k8s.io"}
}

test_rbac8_second_subject_is_denied if {
	docs := patched_binding([{"op": "add", "path": "/subjects/-", "value": {"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}}])
	of_rule(denies_combined(docs), "RBAC-8") == {
		"RBAC-8 RoleBinding cr-checkpoint-runtime: must have exactly one subject (the chart's ServiceAccount), has 2",
		"RBAC-8 RoleBinding cr-checkpoint-runtime: subject Group system:authenticated is not a ServiceAccount",
		"RBAC-8 RoleBinding cr-checkpoint-runtime: subject system:authenticated is a built-in identity, not the chart's ServiceAccount",
	}
}

test_rbac8_anonymous_user_subject_is_denied if {
	docs := patched_binding([{"op": "replace", "path": "/subjects/0", "value": {"kind": "User", "name": "system:anonymous", "apiGroup": "rbac.authorization.k8s.io"}}])
	denials := of_rule(denies_combined(docs), "RBAC-8")
	"RBAC-8 RoleBinding cr-checkpoint-runtime: subject User system:anonymous is not a ServiceAccount" in denials
	"RBAC-8 RoleBinding cr-checkpoint-runtime: subject system:anonymous is a built-in identity, not the chart's ServiceAccount" in denials
}

test_rbac8_any_system_subject_is_denied if {
	docs := patched_binding([{"op": "replace", "path": "/subjects/0", "value": {"kind": "User", "name": "system:kube-scheduler", "apiGroup": "rbac.authorization.k8s.io"}}])
	"RBAC-8 RoleBinding cr-checkpoint-runtime: subject system:kube-scheduler is a built-in identity, not the chart's ServiceAccount" in denies_combined(docs)
}

test_rbac8_default_service_account_subject_is_denied if {
	docs := patched_binding([{"op": "replace", "path": "/subjects/0/name", "value": "default"}])
	of_rule(denies_combined(docs), "RBAC-8") == {
		"RBAC-8 RoleBinding cr-checkpoint-runtime: subject default is a built-in identity, not the chart's ServiceAccount",
		"RBAC-8 RoleBinding cr-checkpoint-runtime: subject ns1/default is not the ServiceAccount the chart's pods run as [ns1/cr-checkpoint-runtime]",
	}
}

test_rbac8_subject_without_namespace_is_denied if {
	docs := patched_binding([{"op": "remove", "path": "/subjects/0/namespace"}])
	"RBAC-8 RoleBinding cr-checkpoint-runtime: ServiceAccount subject cr-checkpoint-runtime needs an explicit namespace (the release namespace)" in denies_combined(docs)
}

test_rbac8_subject_other_than_the_pods_account_is_denied_only_when_combined if {
	binding := json.patch(fixture_role_binding, [{"op": "replace", "path": "/subjects/0/name", "value": "other"}])
	of_rule(denies_single(binding), "RBAC-8") == set()
	of_rule(denies_combined(release_with(index_role_binding, binding)), "RBAC-8") == {"RBAC-8 RoleBinding cr-checkpoint-runtime: subject ns1/other is not the ServiceAccount the chart's pods run as [ns1/cr-checkpoint-runtime]"}
}

test_rbac8_subject_in_another_namespace_is_denied if {
	docs := patched_binding([{"op": "replace", "path": "/subjects/0/namespace", "value": "kube-system"}])
	of_rule(denies_combined(docs), "RBAC-8") == {"RBAC-8 RoleBinding cr-checkpoint-runtime: subject kube-system/cr-checkpoint-runtime is not the ServiceAccount the chart's pods run as [ns1/cr-checkpoint-runtime]"}
}

# With serviceAccount.create=false the chart renders no ServiceAccount; the binding must still
# name the account the pods use.
test_rbac8_named_existing_account_passes if {
	deployment := json.patch(fixture_deployment, [{"op": "replace", "path": "/spec/template/spec/serviceAccountName", "value": "platform-sa"}])
	binding := json.patch(fixture_role_binding, [{"op": "replace", "path": "/subjects/0/name", "value": "platform-sa"}])
	docs := [fixture_config, fixture_role, binding, fixture_service, deployment, fixture_test_pod]
	denies_combined(docs) == set()
}
