# The opt-in admission policy (RBAC-11): a ValidatingAdmissionPolicy that only narrows what the
# runtime's own ServiceAccount may write. Being cluster-scoped, it must never match anyone else
# (a policy matching every user could refuse the whole cluster's ConfigMap writes), must deny
# rather than only warn or audit, and must fail closed.
package main

import rego.v1

vap_kind := "ValidatingAdmissionPolicy"

vap_binding_kind := "ValidatingAdmissionPolicyBinding"

# `request.userInfo.username == "system:serviceaccount:<ns>:<name>"` (the policy narrowing that
# account) or `!=` (the policy reserving the store's names against everyone else): the account.
matched_account(condition) := account if {
	parts := regex.find_all_string_submatch_n(`^request\.userInfo\.username [!=]= "(system:serviceaccount:[a-z0-9.-]+:[a-z0-9.-]+)"$`, object.get(condition, "expression", ""), 1)
	count(parts) == 1
	account := parts[0][1]
}

# A policy judging everyone but one account must stay in one namespace (the coordination one).
judges_everyone_else(policy) if {
	some condition in object.get(policy, ["spec", "matchConditions"], [])
	matched_account(condition)
	contains(condition.expression, "!=")
}

deny contains msg if {
	some policy in objects_of_kind(vap_kind)
	judges_everyone_else(policy)
	selector := object.get(policy, ["spec", "matchConstraints", "namespaceSelector"], {})
	object.keys(object.get(selector, "matchLabels", {})) != {"kubernetes.io/metadata.name"}
	msg := concat("", ["RBAC-11 ", label(policy), ": judges every user but one, so it must be pinned to one namespace by namespaceSelector.matchLabels kubernetes.io/metadata.name only"])
}

policy_accounts(policy) := {account |
	some condition in object.get(policy, ["spec", "matchConditions"], [])
	account := matched_account(condition)
}

deny contains msg if {
	some policy in objects_of_kind(vap_kind)
	count(policy_accounts(policy)) != 1
	msg := concat("", ["RBAC-11 ", label(policy), ": must match exactly one ServiceAccount by a matchCondition request.userInfo.username == \"system:serviceaccount:<namespace>:<name>\"; otherwise it judges every user's writes"])
}

deny contains msg if {
	some policy in objects_of_kind(vap_kind)
	failure := object.get(policy, ["spec", "failurePolicy"], "Fail")
	failure != "Fail"
	msg := concat("", ["RBAC-11 ", label(policy), ": failurePolicy ", failure, " lets a write through when the policy cannot be evaluated; use Fail"])
}

deny contains msg if {
	some binding in objects_of_kind(vap_binding_kind)
	not "Deny" in object.get(binding, ["spec", "validationActions"], [])
	msg := concat("", ["RBAC-11 ", label(binding), ": validationActions must include Deny (Warn or Audit alone refuse nothing)"])
}

deny contains msg if {
	combined
	some binding in objects_of_kind(vap_binding_kind)
	name := object.get(binding, ["spec", "policyName"], "")
	not name in {object.get(policy, ["metadata", "name"], "") | some policy in objects_of_kind(vap_kind)}
	msg := concat("", ["RBAC-11 ", label(binding), ": policyName ", name, " is not a ValidatingAdmissionPolicy this chart renders"])
}

# Seen whole: the account it matches is the one the chart's pods run as.
deny contains msg if {
	combined
	count(chart_service_accounts) > 0
	some policy in objects_of_kind(vap_kind)
	some account in policy_accounts(policy)
	pods := {concat(":", ["system:serviceaccount", pair[0], pair[1]]) | some pair in chart_service_accounts}
	not account in pods
	msg := concat("", ["RBAC-11 ", label(policy), ": matches ", account, ", not the ServiceAccount the chart's pods run as [", concat(", ", sort(pods)), "]"])
}
