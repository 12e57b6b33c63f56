# Test helpers: evaluate deny/warn on a document list, seen whole (conftest --combine) or one
# document at a time (conftest test), and pick the messages of one rule id.
package main

import rego.v1

# The input conftest gives: `--combine` passes a list of {path, contents} (a multi-document
# file's contents is a list); `conftest test` passes each document alone.
combined_input(docs) := [{"path": "release.yaml", "contents": docs}]

denies_combined(docs) := result if {
	result := deny with input as combined_input(docs)
}

warns_combined(docs) := result if {
	result := warn with input as combined_input(docs)
}

denies_single(doc) := result if {
	result := deny with input as doc
}

warns_single(doc) := result if {
	result := warn with input as doc
}

# Messages of one rule id ("RBAC-3") out of a verdict set.
of_rule(messages, rule_id) := {msg |
	some msg in messages
	startswith(msg, concat("", [rule_id, " "]))
}

# The default release with one object replaced (same index as in fixture_release).
release_with(index, doc) := array.concat(array.concat(array.slice(fixture_release, 0, index), [doc]), array.slice(fixture_release, index + 1, count(fixture_release)))

release_without(index) := array.concat(array.slice(fixture_release, 0, index), array.slice(fixture_release, index + 1, count(fixture_release)))

index_service_account := 0

index_config := 1

index_role := 2

index_role_binding := 3

index_service := 4

index_deployment := 5

index_test_pod := 6
