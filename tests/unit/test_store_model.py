"""The store against a plain dict, under random operations on the file backend (hypothesis).

Whatever sequence of set, delete, batch, flush, debounced persist and reopen runs, the store
reads like the model, and after a flush a fresh store over the same folder reads like it too.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.store.core import Store

SHARDS = ["tn/objectstore/a", "tn/objectstore/b", "flowlogs"]
KEYS = st.one_of(
    st.sampled_from([f"{s}/cursor" for s in SHARDS]),
    st.builds(
        lambda s, i: f"{s}/seen/{i}",
        st.sampled_from(SHARDS[:2]),
        st.text("ab/=_", min_size=1, max_size=4),
    ),
    st.builds(lambda i: f"flowlogs/replay/{i}", st.text("xy-", min_size=1, max_size=3)),
)
VALUES = st.text(max_size=12)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = Path(tempfile.mkdtemp(prefix="store-model-"))
        self.clock = FakeClock()
        self.model: dict[str, str] = {}
        self.store = self._open()

    def _open(self) -> Store:
        backend = FileBackend(self.folder, "model")
        return Store.open(backend, writer="w", epoch=1, debounce_seconds=1.0, clock=self.clock)

    @rule(key=KEYS, value=VALUES)
    def set(self, key: str, value: str) -> None:
        self.store.set(key, value)
        self.model[key] = value

    @rule(key=KEYS)
    def delete(self, key: str) -> None:
        self.store.delete(key)
        self.model.pop(key, None)

    @rule(changes=st.dictionaries(KEYS, st.none() | VALUES, max_size=5))
    def batch(self, changes: dict[str, str | None]) -> None:
        self.store.batch(changes)
        for key, value in changes.items():
            if value is None:
                self.model.pop(key, None)
            else:
                self.model[key] = value

    @rule(seconds=st.floats(0, 2))
    def persist_due(self, seconds: float) -> None:
        self.clock.now += seconds
        self.store.persist_due()

    @rule()
    def flush(self) -> None:
        self.store.flush()
        assert self.store.dirty_shards() == []

    @rule()
    def reopen_after_flush(self) -> None:
        self.store.flush()
        self.store = self._open()

    @invariant()
    def reads_like_the_model(self) -> None:
        assert dict(self.store.items()) == self.model
        for key in list(self.model)[:3]:
            assert self.store.get(key) == self.model[key]

    @invariant()
    def flushed_state_is_durable(self) -> None:
        if not self.store.dirty_shards():
            fresh = Store.open(FileBackend(self.folder, "model"), writer="r", migrate=False)
            assert dict(fresh.items()) == self.model


TestStoreModel = StoreMachine.TestCase
TestStoreModel.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)
