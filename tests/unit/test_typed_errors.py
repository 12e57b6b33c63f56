"""Bad input reaching the library's entry points gets a named CheckpointError, never a bare
ValueError: the CLI and the runtime print named errors and exit 2 only for those."""

from __future__ import annotations

import pytest

from checkpoint_runtime.collectors.sink import open_sink
from checkpoint_runtime.constants import ANNOTATION_EPOCH
from checkpoint_runtime.errors import ConfigError, CorruptShardError
from checkpoint_runtime.store.planner import Stamp


@pytest.mark.parametrize("raw", ["²", "٣", "-1", "1.5", ""])
def test_an_epoch_annotation_that_is_not_ascii_digits_is_a_corrupt_shard(raw: str) -> None:
    # "²" and "٣" pass str.isdigit(); int() refuses the first and reads the second as 3.
    with pytest.raises(CorruptShardError, match="epoch annotation"):
        Stamp.from_annotations("tn/objectstore/feed", {ANNOTATION_EPOCH: raw})


def test_an_ascii_epoch_annotation_is_read() -> None:
    assert Stamp.from_annotations("s", {ANNOTATION_EPOCH: "12"}).epoch == 12


@pytest.mark.parametrize(
    ("kind", "path", "key"), [("file", None, "sink.path"), ("x", None, "sink.kind")]
)
def test_a_bad_sink_is_a_config_error_naming_its_key(kind: str, path: str | None, key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        open_sink(kind, path)
    assert key in str(raised.value)


def test_the_stdout_sink_opens() -> None:
    assert open_sink("stdout").__class__.__name__ == "JsonLinesSink"
