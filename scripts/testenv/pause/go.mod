// The test node's pause image: a static binary with no dependencies.
module checkpoint-runtime/testenv/pause

go 1.26.0
