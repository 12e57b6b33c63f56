"""The benchmarks: each module measures one thing beside its baseline and returns a Report.

Every benchmark module exposes `run(quick=False, ...) -> report.Report` and a `main()` that
prints it; run one as `python -m bench.<name>` with `scripts/` on the module path (the justfile's
`bench*` recipes do: `PYTHONPATH=scripts .venv/bin/python -m bench.codec --quick`). `all` runs
them all and writes docs/benchmarks.md. `etcd_worker` is not a benchmark: it is the store
process `etcd_cost` drives, one per release.
"""
