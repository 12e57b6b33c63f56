"""The one way this package builds a Kubernetes API client: from a private copy of the given
Configuration with every automatic retry off (urllib3's default Retry(3) re-sends a PUT whose
answer was lost; the re-sent write then fails 409 and hides that the first one committed).
Every retry of the runtime is its own (`checkpoint_runtime.retry`), inside a deadline.

The copy keeps the credentials and their refresh hook (a projected token is reread), so the
store's client and the elector's client both follow a rotated token.
"""

from __future__ import annotations

import copy

from kubernetes import client


def without_retries(configuration: client.Configuration) -> client.Configuration:
    """A copy of `configuration` whose client never retries on its own."""
    own = copy.deepcopy(configuration)
    own.retries = 0
    own.client_go_retries = False
    return own


def api_client(configuration: client.Configuration) -> client.ApiClient:
    """A new ApiClient on a retry-free copy of `configuration`; the caller closes it."""
    return client.ApiClient(without_retries(configuration))
