"""The policy-and-render gate: render the chart, validate it, and evaluate the Rego policies."""
