# RBAC-11: the admission policy narrows only the chart's own ServiceAccount, denies, fails closed.
package main

import rego.v1

admission_account := "system:serviceaccount:ns1:cr-checkpoint-runtime"

admission_policy := {
	"apiVersion": "admissionregistration.k8s.io/v1",
	"kind": "ValidatingAdmissionPolicy",
	"metadata": {"name": "cr-checkpoint-runtime.ns1", "labels": fixture_deployment.metadata.labels},
	"spec": {
		"failurePolicy": "Fail",
		"matchConditions": [{"name": "runtime-service-account", "expression": concat("", ["request.userInfo.username == \"", admission_account, "\""])}],
		"validations": [{"expression": "true"}],
	},
}

admission_binding := {
	"apiVersion": "admissionregistration.k8s.io/v1",
	"kind": "ValidatingAdmissionPolicyBinding",
	"metadata": {"name": "cr-checkpoint-runtime.ns1", "labels": fixture_deployment.metadata.labels},
	"spec": {"policyName": "cr-checkpoint-runtime.ns1", "validationActions": ["Deny"]},
}

admission_docs(policy, binding) := array.concat(fixture_release, [policy, binding])

rbac11(policy, binding) := of_rule(denies_combined(admission_docs(policy, binding)), "RBAC-11")

test_rbac11_the_chart_policy_passes_whole_and_alone if {
	denies_combined(admission_docs(admission_policy, admission_binding)) == set()
	denies_single(admission_policy) == set()
	denies_single(admission_binding) == set()
}

test_rbac11_a_policy_for_every_user_is_denied if {
	policy := json.patch(admission_policy, [{"op": "replace", "path": "/spec/matchConditions/0/expression", "value": "true"}])
	rbac11(policy, admission_binding) == {"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1: must match exactly one ServiceAccount by a matchCondition request.userInfo.username == \"system:serviceaccount:<namespace>:<name>\"; otherwise it judges every user's writes"}
	count(of_rule(denies_single(json.patch(admission_policy, [{"op": "remove", "path": "/spec/matchConditions"}])), "RBAC-11")) == 1
}

test_rbac11_another_account_is_denied_when_seen_whole if {
	policy := json.patch(admission_policy, [{"op": "replace", "path": "/spec/matchConditions/0/expression", "value": "request.userInfo.username == \"system:serviceaccount:ns1:someone-else\""}])
	rbac11(policy, admission_binding) == {"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1: matches system:serviceaccount:ns1:someone-else, not the ServiceAccount the chart's pods run as [system:serviceaccount:ns1:cr-checkpoint-runtime]"}
	of_rule(denies_single(policy), "RBAC-11") == set()
}

test_rbac11_fail_open_is_denied if {
	policy := json.patch(admission_policy, [{"op": "replace", "path": "/spec/failurePolicy", "value": "Ignore"}])
	rbac11(policy, admission_binding) == {"RBAC-11 ValidatingAdmissionPolicy cr-checkpoint-runtime.ns1: failurePolicy Ignore lets a write through when the policy cannot be evaluated; use Fail"}
}

test_rbac11_a_binding_that_only_warns_is_denied if {
	binding := json.patch(admission_binding, [{"op": "replace", "path": "/spec/validationActions", "value": ["Warn", "Audit"]}])
	rbac11(admission_policy, binding) == {"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1: validationActions must include Deny (Warn or Audit alone refuse nothing)"}
}

test_rbac11_a_binding_to_a_policy_the_chart_does_not_render_is_denied if {
	binding := json.patch(admission_binding, [{"op": "replace", "path": "/spec/policyName", "value": "cluster-wide"}])
	rbac11(admission_policy, binding) == {"RBAC-11 ValidatingAdmissionPolicyBinding cr-checkpoint-runtime.ns1: policyName cluster-wide is not a ValidatingAdmissionPolicy this chart renders"}
}
