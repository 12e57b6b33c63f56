"""The bounds on untrusted input (checkpoint_runtime/limits.py): each refuses its input before
anything is built, naming the source, and quotes at most a short prefix of the value."""

from __future__ import annotations

import pytest

from checkpoint_runtime import limits
from checkpoint_runtime.constants import (
    MAX_EXPANDED_NODES,
    MAX_ITEMS,
    MAX_NESTING_DEPTH,
    MAX_STRING_CHARS,
    MAX_YAML_ALIASES,
)
from checkpoint_runtime.errors import InputLimitError, quote

LAUGHS = 'l0: &l0 ["lol"]\n' + "".join(
    f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10)
)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (LAUGHS, f"more than {MAX_EXPANDED_NODES} values"),
        ("a: &a 1\nb: [" + ", ".join(["*a"] * (MAX_YAML_ALIASES + 1)) + "]\n", "aliases"),
        ("a: " + "[" * (MAX_NESTING_DEPTH + 1) + "]" * (MAX_NESTING_DEPTH + 1), "nested"),
        ("a: " + "x" * (MAX_STRING_CHARS + 1), "a string of"),
    ],
    ids=["billion-laughs", "aliases", "depth", "string"],
)
def test_yaml_beyond_a_bound_is_refused_before_it_is_built(text: str, reason: str) -> None:
    with pytest.raises(InputLimitError, match=reason) as raised:
        limits.check_yaml(text, "values.yaml")
    assert raised.value.path == "values.yaml"
    assert len(str(raised.value)) < 300  # the value is quoted by a prefix only


def test_yaml_within_the_bounds_passes() -> None:
    limits.check_yaml("a: &a {b: [1, 2]}\nc: *a\nd:\n  <<: *a\n  e: 1\n", "values.yaml")


def test_a_document_walk_names_the_key_path() -> None:
    with pytest.raises(InputLimitError) as raised:
        limits.check_document({"collectors": [{"url": "x" * (MAX_STRING_CHARS + 1)}]}, "")
    assert raised.value.path == "collectors[0].url"
    with pytest.raises(InputLimitError, match="entries"):
        limits.check_document({"a": list(range(MAX_ITEMS + 1))}, "config")
    deep: object = 1
    for _ in range(MAX_NESTING_DEPTH + 2):
        deep = [deep]
    with pytest.raises(InputLimitError, match="nested"):
        limits.check_document(deep, "config")


def test_a_file_over_the_size_bound_is_not_read(tmp_path: pytest.TempPathFactory) -> None:
    path = tmp_path / "big.yaml"  # type: ignore[operator]
    path.write_bytes(b"a" * 11)
    with pytest.raises(InputLimitError, match="larger than 10 bytes"):
        limits.read_text(path, "big.yaml", limit=10)


def test_quote_cuts_a_long_value_and_says_how_long_it_was() -> None:
    assert quote("short") == "'short'"
    long = quote("x" * 1000)
    assert len(long) < 110
    assert long.endswith("(1000 long)")
