# The default render passes every deny rule, both seen whole and one document at a time.
package main

import rego.v1

test_default_release_has_no_denies_combined if {
	denies_combined(fixture_release) == set()
}

test_default_release_has_no_denies_per_document if {
	every doc in fixture_release {
		denies_single(doc) == set()
	}
}

test_default_release_warns_only_about_tag_pinning if {
	warns_combined(fixture_release) == {
		"POD-15 Deployment cr-checkpoint-runtime: container runtime: image checkpoint-runtime:0.1.0 is pinned by tag only; a digest cannot move",
		"POD-15 Pod cr-checkpoint-runtime-test: container healthz: image checkpoint-runtime:0.1.0 is pinned by tag only; a digest cannot move",
	}
}

test_per_document_mode_reads_plain_input if {
	documents_of(fixture_role) == [fixture_role]
}
