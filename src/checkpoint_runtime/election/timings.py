"""The leader-election timings, validated the way client-go validates its LeaderElectionConfig:
lease duration > renew deadline > jitter factor x retry period, all positive."""

from __future__ import annotations

from dataclasses import dataclass

from checkpoint_runtime.constants import (
    LEADER_ELECTION_JITTER_FACTOR,
    LEASE_DURATION_SECONDS,
    RENEW_DEADLINE_SECONDS,
    RETRY_PERIOD_SECONDS,
)
from checkpoint_runtime.errors import ConfigError


@dataclass(frozen=True)
class ElectionTimings:
    """client-go's three durations, validated as NewLeaderElector validates them."""

    lease_duration: float = LEASE_DURATION_SECONDS
    renew_deadline: float = RENEW_DEADLINE_SECONDS
    retry_period: float = RETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        path = "leaderElection"
        if self.lease_duration < 1 or self.lease_duration != int(self.lease_duration):
            raise ConfigError(
                f"{path}.leaseDurationSeconds",
                f"must be a whole number of seconds >= 1 (the Lease stores int32 seconds), "
                f"got {self.lease_duration:g}",
            )
        if self.retry_period <= 0:
            raise ConfigError(f"{path}.retryPeriodSeconds", "must be greater than zero")
        if self.lease_duration <= self.renew_deadline:
            raise ConfigError(
                f"{path}.renewDeadlineSeconds",
                f"leaseDurationSeconds ({self.lease_duration:g}) must be greater than "
                f"renewDeadlineSeconds ({self.renew_deadline:g})",
            )
        if self.renew_deadline <= LEADER_ELECTION_JITTER_FACTOR * self.retry_period:
            raise ConfigError(
                f"{path}.renewDeadlineSeconds",
                f"renewDeadlineSeconds ({self.renew_deadline:g}) must be greater than "
                f"{LEADER_ELECTION_JITTER_FACTOR:g} x retryPeriodSeconds ({self.retry_period:g})",
            )
