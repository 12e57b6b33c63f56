# The gate's Wasm entrypoint, compiled with the conftest policies (policy/*.rego) by `just gen`.
#
# One evaluation returns every deny and warn the policies give, the two ways conftest runs them:
# each document alone (`conftest test`) and the release as a whole (`conftest test --combine`).
# Input: {"documents": [<document>, ...], "combined": [{"path": ..., "contents": ...}, ...]}.
package gate

import rego.v1

verdicts := {"documents": per_document, "combined": combined}

per_document := [verdict |
	some doc in input.documents
	deny := data.main.deny with input as doc
	warn := data.main.warn with input as doc
	verdict := {"deny": deny, "warn": warn}
]

combined := {"deny": deny, "warn": warn} if {
	deny := data.main.deny with input as input.combined
	warn := data.main.warn with input as input.combined
}
