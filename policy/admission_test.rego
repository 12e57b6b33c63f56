# RBAC-11: the admission policies are the chart's own: the one narrowing the chart's
# ServiceAccount and the one reserving the store's names for it, each bound with Deny, failing
# closed. The fixture is the chart's real render with the policies on (fixtures_test.rego).
package main

import rego.v1

# Indexes in fixture_admission_release (render order).
index_narrowing := 0

index_narrowing_binding := 1

index_reserved := 2

index_reserved_binding := 3

narrowing_policy := fixture_admission_release[index_narrowing]

reserved_policy := fixture_admission_release[index_reserved]

narrowing_name := "cr-checkpoint-runtime.ns1"

reserved_name := "cr-checkpoint-runtime.ns1.reserved"

account_condition := "request.userInfo.username == \"system:serviceaccount:ns1:cr-checkpoint-runtime\""

admission_with(index, doc) := array.concat(array.concat(array.slice(fixture_admission_release, 0, index), [doc]), array.slice(fixture_admission_release, index + 1, count(fixture_admission_release)))

admission_without(index) := array.concat(array.slice(fixture_admission_release, 0, index), array.slice(fixture_admission_release, index + 1, count(fixture_admission_release)))

patched(index, patch) := json.patch(fixture_admission_release[index], patch)

rbac11_with(index, patch) := of_rule(denies_combined(admission_with(index, patched(index, patch))), "RBAC-11")

differs(name, fields) := concat("", ["RBAC-11 ValidatingAdmissionPolicy ", name, ": differs from the chart's own policy at ", fields, " (derived from config.json and the pods' ServiceAccount system:serviceaccount:ns1:cr-checkpoint-runtime)"])

test_rbac11_the_chart_policies_pass_whole_and_alone if {
	narrowing_policy.metadata.name == narrowing_name
	reserved_policy.metadata.name == reserved_name
	denies_combined(fixture_admission_release) == set()
	every doc in fixture_admission_release {
		denies_single(doc) == set()
	}
}

test_rbac11_an_edited_expression_is_denied if {
	rbac11_with(index_narrowing, [{"op": "replace", "path": "/spec/validations/2/expression", "value": "true"}]) == {differs(narrowing_name, "spec.validations[2]")}
	rbac11_with(index_reserved, [{"op": "replace", "path": "/spec/variables/6/expression", "value": "false"}]) == {differs(reserved_name, "spec.variables[6]")}
}

test_rbac11_a_dropped_validation_or_widened_match_is_denied if {
	rbac11_with(index_narrowing, [{"op": "remove", "path": "/spec/validations/1"}]) == {differs(narrowing_name, "spec.validations[1], spec.validations[2]")}
	rbac11_with(index_reserved, [{"op": "remove", "path": "/spec/matchConstraints/namespaceSelector"}]) == {
		differs(reserved_name, "spec.matchConstraints"),
		"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1.reserved: judges every user but one, so it must be pinned to one namespace by namespaceSelector.matchLabels kubernetes.io/metadata.name only",
	}
}

test_rbac11_messages_are_not_compared if {
	rbac11_with(index_reserved, [{"op": "replace", "path": "/spec/validations/0/message", "value": "another text"}]) == set()
}

test_rbac11_a_policy_the_chart_does_not_render_is_denied if {
	renamed := patched(index_reserved, [{"op": "replace", "path": "/metadata/name", "value": "cluster-wide"}])
	of_rule(denies_combined(admission_with(index_reserved, renamed)), "RBAC-11") == {
		"RBAC-11 ValidatingAdmissionPolicy cluster-wide: not one of the chart's policies (cr-checkpoint-runtime.ns1, cr-checkpoint-runtime.ns1.reserved)",
		"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1.reserved: missing; the chart renders both admission policies and their bindings",
		"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1.reserved: policyName cr-checkpoint-runtime.ns1.reserved is not a ValidatingAdmissionPolicy this chart renders",
	}
}

test_rbac11_a_missing_binding_is_denied if {
	of_rule(denies_combined(admission_without(index_reserved_binding)), "RBAC-11") == {"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1.reserved: missing; the chart renders both admission policies and their bindings"}
}

test_rbac11_a_binding_other_than_the_chart_s_is_denied if {
	exactly := "RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1.reserved: spec must be exactly {policyName: cr-checkpoint-runtime.ns1.reserved, validationActions: [Deny]} (no matchResources, paramRef or other actions)"
	rbac11_with(index_reserved_binding, [{"op": "add", "path": "/spec/matchResources", "value": {"namespaceSelector": {"matchLabels": {"x": "y"}}}}]) == {exactly}
	rbac11_with(index_reserved_binding, [{"op": "replace", "path": "/spec/validationActions", "value": ["Deny", "Warn"]}]) == {exactly}
}

test_rbac11_a_binding_that_only_warns_is_denied if {
	binding := patched(index_narrowing_binding, [{"op": "replace", "path": "/spec/validationActions", "value": ["Warn", "Audit"]}])
	of_rule(denies_single(binding), "RBAC-11") == {"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1: validationActions must include Deny (Warn or Audit alone refuse nothing)"}
	count(of_rule(denies_combined(admission_with(index_narrowing_binding, binding)), "RBAC-11")) == 2
}

test_rbac11_a_binding_to_a_policy_the_chart_does_not_render_is_denied if {
	rbac11_with(index_narrowing_binding, [{"op": "replace", "path": "/spec/policyName", "value": "cluster-wide"}]) == {
		"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1: policyName cluster-wide is not a ValidatingAdmissionPolicy this chart renders",
		"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1: spec must be exactly {policyName: cr-checkpoint-runtime.ns1, validationActions: [Deny]} (no matchResources, paramRef or other actions)",
	}
}

test_rbac11_a_system_break_glass_group_is_denied if {
	patch := [{"op": "replace", "path": "/spec/variables/5/expression", "value": "\"system:authenticated\""}]
	of_rule(denies_single(patched(index_reserved, patch)), "RBAC-11") == {"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1.reserved: break-glass group system:authenticated is a system: group or not a group name; every account or user of a kind is in a system: group"}
	rbac11_with(index_reserved, [{"op": "replace", "path": "/spec/variables/5/expression", "value": "variables.name"}]) == {differs(reserved_name, "spec.variables[5]")}
	rbac11_with(index_reserved, [{"op": "replace", "path": "/spec/variables/5/expression", "value": "\"oncall\""}]) == set()
}

test_rbac11_a_policy_for_every_user_is_denied if {
	policy := json.patch(narrowing_policy, [{"op": "replace", "path": "/spec/matchConditions/0/expression", "value": "true"}])
	of_rule(denies_single(policy), "RBAC-11") == {"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1: must match exactly one ServiceAccount by a matchCondition request.userInfo.username == \"system:serviceaccount:<namespace>:<name>\"; otherwise it judges every user's writes"}
	count(of_rule(denies_single(json.patch(narrowing_policy, [{"op": "remove", "path": "/spec/matchConditions"}])), "RBAC-11")) == 1
}

test_rbac11_another_account_is_denied_when_seen_whole if {
	patch := [{"op": "replace", "path": "/spec/matchConditions/0/expression", "value": "request.userInfo.username == \"system:serviceaccount:ns1:someone-else\""}]
	rbac11_with(index_narrowing, patch) == {
		"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1: matches system:serviceaccount:ns1:someone-else, not the ServiceAccount the chart's pods run as [system:serviceaccount:ns1:cr-checkpoint-runtime]",
		differs(narrowing_name, "spec.matchConditions[0]"),
	}
	of_rule(denies_single(patched(index_narrowing, patch)), "RBAC-11") == set()
}

test_rbac11_fail_open_is_denied if {
	rbac11_with(index_narrowing, [{"op": "replace", "path": "/spec/failurePolicy", "value": "Ignore"}]) == {
		"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1: failurePolicy Ignore lets a write through when the policy cannot be evaluated; use Fail",
		differs(narrowing_name, "spec.failurePolicy"),
	}
}

test_rbac11_nothing_is_compared_without_the_whole_release if {
	# the narrowing policy alone, next to no Deployment: the structural checks only
	of_rule(denies_combined([narrowing_policy, fixture_admission_release[index_narrowing_binding]]), "RBAC-11") == set()
	account_condition == narrowing_policy.spec.matchConditions[0].expression
}

test_rbac11_a_spec_that_is_not_an_object_is_denied if {
	rbac11_with(index_reserved, [{"op": "replace", "path": "/spec", "value": "x"}]) == {
		differs(reserved_name, "spec.failurePolicy, spec.matchConditions, spec.matchConstraints, spec.validations, spec.variables"),
		"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1.reserved: must match exactly one ServiceAccount by a matchCondition request.userInfo.username == \"system:serviceaccount:<namespace>:<name>\"; otherwise it judges every user's writes",
	}
}

# With several leadership buckets the policies admit the store's Lease, each bucket's and each
# membership slot's (variables.leases): the policies rendered for one bucket do not fit a
# config of three.
index_admission_config := 4

test_rbac11_policies_of_one_bucket_under_a_config_of_three_are_denied if {
	config := fixture_admission_release[index_admission_config]
	three := json.patch(config, [{
		"op": "replace",
		"path": "/data/config.json",
		"value": json.marshal(json.patch(json.unmarshal(config.data["config.json"]), [{"op": "add", "path": "/store/buckets", "value": 3}])),
	}])
	denials := of_rule(denies_combined(admission_with(index_admission_config, three)), "RBAC-11")
	count(denials) == 2
	some narrowing in denials
	contains(narrowing, "cr-checkpoint-runtime.ns1: differs from the chart's own policy at spec.validations[2], spec.variables[3]")
}
