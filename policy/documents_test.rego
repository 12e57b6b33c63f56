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

test_pod_spec_of_a_cron_job_is_its_job_template_pod_spec if {
	pod_spec({"kind": "CronJob", "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": []}}}}}}) == {"containers": []}
}
