package main

import rego.v1

test_documents_of_a_single_document if {
	documents_of({"kind": "Role"}) == [{"kind": "Role"}]
}

test_documents_of_combined_input_flattens_multi_document_files if {
	documents_of([
		{"path": "a.yaml", "contents": [{"kind": "Role"}, null, {"kind": "RoleBinding"}]},
		{"path": "b.yaml", "contents": {"kind": "Service"}},
	]) == [{"kind": "Role"}, {"kind": "RoleBinding"}, {"kind": "Service"}]
}

test_documents_of_ignores_scalars if {
	documents_of([{"path": "a.yaml", "contents": ["text", 3]}]) == []
}
