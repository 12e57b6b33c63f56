"""The store proves its guard is on: when the config says the chart installed the store's
ValidatingAdmissionPolicy, `run` checks at start that the API server enforces it, and refuses
to start (AdmissionPolicyNotEnforcedError, exit 2) when it does not.

The proof is a request the policy must refuse and RBAC allows: a server-side dry run
(`dryRun=All`: admitted or not, nothing is stored) of a ConfigMap create, as the store's own
ServiceAccount, under a name that is none of the store's objects (`ADMISSION_PROBE_SUFFIX`).
RBAC cannot pin `create` to a name, so the chart's Role grants it unpinned in every scope: the
request needs no verb the Role lacks, and only the policy can refuse it. The API server runs
admission policies on dry-run requests (checked on the real server), so:

- refused by the policy (its name in the answer): enforced, start;
- admitted: the policy or its binding is missing, or the binding only warns or audits
  (`validationActions` without Deny; a Warn binding's message comes back as a warning);
- refused by anything else (RBAC, another admission plugin): no proof either way.

Transient answers (429, 5xx, no answer), and an admitted dry run (a policy or binding just
installed reaches the API server's admission cache asynchronously), are retried under the
store's deadline (`store.deadlineSeconds`): a policy that is not enforced is refused when it
runs out.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from checkpoint_runtime.constants import ADMISSION_PROBE_SUFFIX
from checkpoint_runtime.errors import AdmissionPolicyNotEnforcedError
from checkpoint_runtime.retry import Backoff, Deadline

if TYPE_CHECKING:
    from checkpoint_runtime.backends.kubernetes import KubernetesBackend


def probe_name(lease_name: str) -> str:
    """The ConfigMap the dry run asks to create: no head (`<lease>-<key>-<16 hex>`) and no
    chunk slot (`<head>-c<generation><index>`) of the store has this name."""
    return f"{lease_name}{ADMISSION_PROBE_SUFFIX}"


def _refused_by(policy: str, message: str) -> bool:
    """The API server's answer names the policy that denied (`ValidatingAdmissionPolicy
    '<name>' with binding '<name>' denied request: ...`)."""
    return f"ValidatingAdmissionPolicy '{policy}'" in message


def check_enforced(backend: KubernetesBackend, policy: str, deadline: Deadline) -> None:
    """Return once the API server refused the dry run by `policy`; raise
    AdmissionPolicyNotEnforcedError when it admitted it or another check refused it."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    name = probe_name(backend.lease_name)
    body = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name=name, namespace=backend.namespace),
        data={"purpose": "a dry run the store's admission policy must refuse"},
    )
    backoff = Backoff()
    while True:
        deadline.check(f"the dry run that proves admission policy {policy} is enforced")
        try:
            answer: Any = backend.core.create_namespaced_config_map_with_http_info(
                backend.namespace, body, dry_run="All", _request_timeout=deadline.timeout()
            )
        except ApiException as error:
            status, message = int(error.status or 0), str(error.body or error.reason)
            if status in (403, 422) and _refused_by(policy, message):
                return
            if (status == 429 or status >= 500) and backoff.pause(deadline, error):
                continue
            raise AdmissionPolicyNotEnforcedError(
                policy,
                f"the dry run of ConfigMap {name} got {status} {error.reason} from something "
                f"other than the policy: {message}",
            ) from None
        except (HTTPError, OSError) as error:
            if backoff.pause(deadline, error):
                continue
            raise AdmissionPolicyNotEnforcedError(
                policy, f"the dry run of ConfigMap {name} got no answer: {error}"
            ) from None
        # A policy or binding just installed reaches admission asynchronously: ask again while
        # time is left. A pause that overslept the deadline (a loaded machine) still ends in the
        # named refusal below, not in a bare DeadlineExceeded at the top of the loop.
        if backoff.pause(deadline, None) and not deadline.expired():
            continue
        headers = answer[2] if isinstance(answer, tuple) and len(answer) > 2 else {}
        warning = (headers or {}).get("Warning", "")
        raise AdmissionPolicyNotEnforcedError(
            policy,
            f"for {deadline.seconds:g} s the API server admitted a dry run of ConfigMap {name} "
            "by the store's ServiceAccount, which the policy must refuse: the policy or its "
            "binding is "
            "missing, or the binding does not deny (validationActions must include Deny)"
            + (f"; the API server warned: {warning}" if warning else ""),
        )
