"""The store's retry backoff (pure logic, on a fake clock): capped, and never pausing past the
operation's deadline. The API server tests (tests/store/test_store_server_answers.py) bound the
number of attempts from above; these bound each pause, so an uncapped backoff fails here."""

from __future__ import annotations

import random

import pytest

from checkpoint_runtime import retry
from checkpoint_runtime.retry import BACKOFF_MAX, JITTER_MIN, UNCAPPED_STEPS, Backoff, Deadline


class FakeTime:
    """A monotonic clock that only `sleep` advances."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def fake_time(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(retry.time, "sleep", fake.sleep)
    return fake


class Throttled(Exception):
    """An API answer asking for `Retry-After` seconds."""

    def __init__(self, status: int, retry_after: str) -> None:
        super().__init__(status)
        self.status = status
        self.headers = {"Retry-After": retry_after}


@pytest.mark.parametrize("seed", range(5))
def test_every_pause_is_capped(seed: int) -> None:
    backoff = Backoff(random.Random(seed))
    pauses = [backoff.delay(None) for _ in range(60)]
    assert max(pauses) <= BACKOFF_MAX
    assert min(pauses[UNCAPPED_STEPS + 1 :]) >= JITTER_MIN * BACKOFF_MAX  # it stays at the cap


def test_retry_after_is_honoured_beyond_the_cap() -> None:
    backoff = Backoff(random.Random(0))
    assert backoff.delay(Throttled(429, "7")) == 7.0  # the server asked for longer than the cap
    assert backoff.delay(Throttled(500, "7")) <= BACKOFF_MAX  # only 429 and 503 are asked


@pytest.mark.parametrize("seconds", [0.3, 3.0, 30.0])
def test_pauses_never_run_past_the_deadline(fake_time: FakeTime, seconds: float) -> None:
    deadline = Deadline(seconds, clock=fake_time)
    expires = fake_time.now + seconds
    backoff = Backoff(random.Random(1))
    while backoff.pause(deadline, None):
        assert fake_time.now < expires
    assert fake_time.now < expires
    assert fake_time.sleeps  # it did pause while there was time


def test_a_retry_after_longer_than_the_deadline_ends_the_retries_at_once(
    fake_time: FakeTime,
) -> None:
    deadline = Deadline(5.0, clock=fake_time)
    assert not Backoff().pause(deadline, Throttled(503, "30"))
    assert fake_time.sleeps == []  # no pause that would end past the deadline
