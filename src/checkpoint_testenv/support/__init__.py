"""What tests, the demo, the soak and the benchmarks share to drive the system under test.

- `kubetarget`: one coordination namespace on the real API server, stores acting as the chart's
  ServiceAccount (optionally through another host, e.g. the fault proxy) and raw admin reads of
  what is really stored;
- `runtime_process`: `checkpoint-runtime run` as a real subprocess, observed through its HTTP
  port and its record sink;
- `v3rows`: a v3 shard's rows from its head and chunk blobs, the tests' own reader;
- `polling`: waiting for a condition, or for state to settle, with a bound;
- `clocks`: clocks a test moves by hand;
- `exploration`: how deep explorers, random campaigns and fuzzers go (a sample that rotates with
  the commit, or everything), the seed that replays them, and a stateless depth-first search
  that makes each class of equivalent runs once;
- `timing`: the benchmarks' timing of one call, percentiles and interleaved (rotated) order.
"""
