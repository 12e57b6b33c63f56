"""A real etcd + kube-apiserver on loopback, for tests that need the API server's own behaviour.

Validation (the 1 MiB ConfigMap check), optimistic concurrency and the RBAC authorizer are what
the store and the chart depend on, so tests talk to the real server built from the pinned Go
modules. Ports and the etcd data dir stay fixed for the life of a ControlPlane, so killing and
restarting either server keeps the stored state, as a real outage would.

`quota_backend_bytes` starts etcd with a small space quota (`--quota-backend-bytes`), so a test
can fill it and see what the whole cluster answers once etcd raises its NOSPACE alarm; such a
plane is separate from the session's. `EtcdAdmin` reads etcd's own /metrics and status and frees
space again (compact, defragment, disarm), through etcd's JSON gateway.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ipaddress
import itertools
import json
import secrets
import socket
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from kubernetes import client

from checkpoint_testenv import binaries, certs
from checkpoint_testenv.processes import ManagedProcess, wait_until

ADMIN_USER = "checkpoint-testenv-admin"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
_START_TIMEOUT = 90.0
# a small etcd space quota for tests that fill it: 1/64 of etcd's 2 GiB default, a few dozen
# near-1-MiB ConfigMap writes beyond what a fresh API server stores.
SMALL_ETCD_QUOTA_BYTES = 32 * 1024 * 1024


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the servers bind it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class StartupTimes:
    """Seconds from spawning each server until it answered its health/readiness check."""

    etcd: list[float] = field(default_factory=list)
    apiserver: list[float] = field(default_factory=list)


class ControlPlane:
    """etcd and kube-apiserver processes plus the credentials and clients to reach them."""

    # Where etcd and kube-apiserver listen and what the API server advertises; a subclass that
    # runs them elsewhere (a node's network namespace) sets its own before __init__.
    address = "127.0.0.1"

    def __init__(
        self,
        bin_dir: Path,
        workdir: Path,
        quota_backend_bytes: int | None = None,
        apiserver: Path | None = None,
    ) -> None:
        self.bin_dir = bin_dir
        self.apiserver_binary = apiserver or bin_dir / "kube-apiserver"
        """The kube-apiserver run (another minor's, over the same etcd, when given)."""
        self.workdir = workdir
        self.quota_backend_bytes = quota_backend_bytes
        """etcd's space quota (None: etcd's default, 2 GiB)."""
        self.etcd_client_port = free_port()
        self.etcd_peer_port = free_port()
        self.port = free_port()
        self.host = f"https://{self.address}:{self.port}"
        self.admin_token = secrets.token_hex(24)
        self.startup = StartupTimes()
        self.startup_total = 0.0
        self._certs: certs.Certificates | None = None
        self._names = itertools.count(1)
        self._etcd = ManagedProcess("etcd", self.wrap(self._etcd_argv()), workdir / "etcd.log")
        self._apiserver = ManagedProcess(
            "kube-apiserver", self.wrap(self._apiserver_argv()), workdir / "kube-apiserver.log"
        )
        self.kubeconfig = workdir / "admin.kubeconfig"

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Generate credentials, start etcd then kube-apiserver, and wait until both are ready."""
        self.write_credentials()
        atexit.register(self.stop)
        self.start_etcd()
        self.start_apiserver()

    def stop(self) -> None:
        """Shut both servers down (apiserver first); safe to call more than once."""
        self._apiserver.stop()
        self._etcd.stop()

    def start_etcd(self) -> None:
        self._etcd.start()
        seconds = wait_until(self._etcd_healthy, self._etcd, _START_TIMEOUT, "healthy")
        self.startup.etcd.append(seconds)

    def kill_etcd(self) -> None:
        self._etcd.kill()

    def restart_etcd(self) -> None:
        """SIGKILL etcd and start it again on the same data dir and ports."""
        self._etcd.kill()
        self.start_etcd()

    def start_apiserver(self) -> None:
        self._apiserver.start()
        seconds = wait_until(self._apiserver_ready, self._apiserver, _START_TIMEOUT, "ready")
        self.startup.apiserver.append(seconds)

    def kill_apiserver(self) -> None:
        self._apiserver.kill()

    def replace_apiserver(self, binary: Path) -> None:
        """Stop kube-apiserver gracefully and start `binary` (another minor) in its place: same
        port, flags, certificates, service-account keys and etcd, as a managed upgrade or its
        rollback replaces the API server and keeps the cluster's data."""
        self._apiserver.stop()
        self.apiserver_binary = binary
        self._apiserver.argv = self.wrap(self._apiserver_argv())
        self.start_apiserver()

    def restart_apiserver(self) -> None:
        """SIGKILL kube-apiserver and start it again on the same port."""
        self._apiserver.kill()
        self.start_apiserver()

    @property
    def etcd_running(self) -> bool:
        return self._etcd.running

    @property
    def apiserver_running(self) -> bool:
        return self._apiserver.running

    # ---- clients ---------------------------------------------------------------------------

    @property
    def ca_file(self) -> Path:
        return self._pki.ca_cert

    @property
    def serving_cert(self) -> Path:
        return self._pki.serving_cert

    @property
    def serving_key(self) -> Path:
        return self._pki.serving_key

    def configuration(
        self, token: str | None = None, host: str | None = None
    ) -> client.Configuration:
        """A client Configuration: admin when `token` is None. Retries are left unconfigured."""
        configuration = client.Configuration()
        configuration.host = host or self.host
        configuration.ssl_ca_cert = str(self.ca_file)
        configuration.api_key = {"authorization": token or self.admin_token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        return configuration

    @property
    def etcd_url(self) -> str:
        return f"http://{self.address}:{self.etcd_client_port}"

    def etcd(self) -> EtcdAdmin:
        """etcd's own metrics, status and space maintenance."""
        return EtcdAdmin(self.etcd_url)

    def admin_api(self) -> client.ApiClient:
        """A new admin ApiClient; the caller closes it."""
        return client.ApiClient(self.configuration())

    def create_namespace(self, prefix: str = "t") -> str:
        """Create a namespace with a name never used before (deleted ones never go away here)."""
        name = f"{prefix}-{next(self._names)}-{secrets.token_hex(3)}"
        with self.admin_api() as api:
            body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
            client.CoreV1Api(api).create_namespace(body)
        return name

    def service_account_token(
        self, namespace: str, name: str, expiration_seconds: int = 3600
    ) -> str:
        """A bound token for an existing ServiceAccount, via the TokenRequest API."""
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[SERVICE_ACCOUNT_ISSUER], expiration_seconds=expiration_seconds
            )
        )
        with self.admin_api() as api:
            answer = client.CoreV1Api(api).create_namespaced_service_account_token(
                name, namespace, request
            )
        if answer.status is None or not answer.status.token:
            raise RuntimeError(f"TokenRequest for {namespace}/{name} returned no token")
        return str(answer.status.token)

    # ---- extension points (overridden by a node's control plane) ----------------------------

    def write_credentials(self) -> None:
        """The CA and certs, the static tokens and the admin kubeconfig."""
        names = [self.address, *self.serving_names()]
        self._certs = certs.generate(self.workdir / "pki", [n for n in names if n != "127.0.0.1"])
        (self.workdir / "tokens.csv").write_text(
            "".join(f'{token},{user},{user},"{group}"\n' for token, user, group in self.users())
        )
        write_kubeconfig(self.kubeconfig, self.host, self.ca_file, ADMIN_USER, self.admin_token)

    def wrap(self, argv: list[str]) -> list[str]:
        """The command that runs `argv` where the servers live (here: as it is)."""
        return argv

    def serving_names(self) -> list[str]:
        """Subject alternative names of the serving cert besides the listening address."""
        return []

    def users(self) -> list[tuple[str, str, str]]:
        """(token, user, group) of each static-token user; the admin is in system:masters."""
        return [(self.admin_token, ADMIN_USER, "system:masters")]

    def apiserver_options(self) -> dict[str, str]:
        """kube-apiserver's flags, name (without dashes) to value."""
        pki = self.workdir / "pki"
        return {
            "etcd-servers": f"http://{self.address}:{self.etcd_client_port}",
            "secure-port": str(self.port),
            "bind-address": self.address,
            "advertise-address": self.address,
            "cert-dir": str(self.workdir / "apiserver-certs"),
            "tls-cert-file": str(pki / "serving.crt"),
            "tls-private-key-file": str(pki / "serving.key"),
            "token-auth-file": str(self.workdir / "tokens.csv"),
            "authorization-mode": "RBAC",
            "service-cluster-ip-range": SERVICE_CLUSTER_IP_RANGE,
            "service-account-issuer": SERVICE_ACCOUNT_ISSUER,
            "service-account-key-file": str(pki / "sa.pub"),
            "service-account-signing-key-file": str(pki / "sa.key"),
            # No controller-manager creates the default ServiceAccount a Pod would need.
            "disable-admission-plugins": "ServiceAccount",
            # The `kubernetes` Service's endpoints: the advertised address, which from 1.37
            # may not be a loopback one (no pod here could reach it anyway). A node's plane
            # advertises its node address and keeps the reconciler.
            **(
                {"endpoint-reconciler-type": "none"}
                if ipaddress.ip_address(self.address).is_loopback
                else {}
            ),
        }

    # ---- internals -------------------------------------------------------------------------

    @property
    def _pki(self) -> certs.Certificates:
        if self._certs is None:
            raise RuntimeError("control plane not started")
        return self._certs

    def _etcd_argv(self) -> list[str]:
        client_url = f"http://{self.address}:{self.etcd_client_port}"
        peer_url = f"http://{self.address}:{self.etcd_peer_port}"
        return [
            str(self.bin_dir / "etcd"),
            "--name=testenv",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={client_url}",
            f"--advertise-client-urls={client_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=testenv={peer_url}",
            "--initial-cluster-state=new",
            # Durability against power loss is not what these tests check; fsync costs seconds.
            "--unsafe-no-fsync",
            "--log-level=warn",
            *(
                [f"--quota-backend-bytes={self.quota_backend_bytes}"]
                if self.quota_backend_bytes is not None
                else []
            ),
        ]

    def _apiserver_argv(self) -> list[str]:
        options = self.apiserver_options()
        return [str(self.apiserver_binary), *(f"--{k}={v}" for k, v in options.items())]

    def _etcd_healthy(self) -> bool:
        url = f"http://{self.address}:{self.etcd_client_port}/health"
        try:
            with urllib.request.urlopen(url, timeout=1) as answer:
                return b'"true"' in answer.read()
        except (OSError, urllib.error.URLError):
            return False

    def _apiserver_ready(self) -> bool:
        request = urllib.request.Request(
            f"{self.host}/readyz", headers={"Authorization": f"Bearer {self.admin_token}"}
        )
        context = ssl.create_default_context(cafile=str(self.ca_file))
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as answer:
                return bool(answer.status == 200)
        except (OSError, urllib.error.URLError):
            return False


def write_kubeconfig(path: Path, server: str, ca_file: Path, user: str, token: str) -> Path:
    """A kubeconfig for `server` that authenticates as `user` with a bearer `token`; `path`."""
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "testenv",
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "testenv", "context": {"cluster": "testenv", "user": user}}],
        "current-context": "testenv",
    }
    path.write_text(yaml.safe_dump(kubeconfig))
    return path


def start_control_plane(
    bin_dir: Path,
    workdir: Path,
    attempts: int = 3,
    quota_backend_bytes: int | None = None,
    apiserver: Path | None = None,
) -> ControlPlane:
    """Start a ControlPlane (`apiserver`: another minor's kube-apiserver over bin_dir's etcd),
    stopping whatever did start if the rest fails.

    Free ports are picked before the servers bind them, so another process can take one in
    between; only that failure ("address already in use") is retried, on new ports.
    """
    for attempt in range(1, attempts + 1):
        folder = workdir / f"attempt-{attempt}" if attempt > 1 else workdir
        folder.mkdir(parents=True, exist_ok=True)
        plane = ControlPlane(bin_dir, folder, quota_backend_bytes, apiserver)
        begun = time.monotonic()
        try:
            plane.start()
        except RuntimeError as failure:
            plane.stop()
            if "address already in use" not in str(failure) or attempt == attempts:
                raise
            continue
        except BaseException:
            plane.stop()
            raise
        plane.startup_total = time.monotonic() - begun
        return plane
    raise AssertionError("unreachable")


@contextlib.contextmanager
def running_control_plane(
    workdir: Path | None = None, quota_backend_bytes: int | None = None
) -> Iterator[ControlPlane]:
    """A control plane of the built binaries for a script (benchmarks, soak), stopped on exit;
    in a temporary folder unless `workdir` is given; etcd's quota as given (None: default)."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="controlplane-")))
        plane = start_control_plane(
            binaries.locate(), workdir, quota_backend_bytes=quota_backend_bytes
        )
        stack.callback(plane.stop)
        yield plane


class EtcdAdmin:
    """etcd's client URL: its Prometheus /metrics, its status and its space maintenance, over
    plain HTTP (the test etcd serves no TLS) and etcd's JSON gateway (`/v3/...`)."""

    def __init__(self, url: str) -> None:
        self.url = url

    def metrics(self) -> dict[str, float]:
        """Every unlabelled sample of etcd's /metrics, name to value (labelled samples are
        summed per name, e.g. the histogram buckets are not wanted here)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        samples: dict[str, float] = {}
        for line in text.splitlines():
            if not line or line.startswith("#"):
                continue
            name_part, _, value = line.rpartition(" ")
            name = name_part.split("{", 1)[0]
            try:
                samples[name] = samples.get(name, 0.0) + float(value)
            except ValueError:
                continue
        return samples

    def _call(self, path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            f"{self.url}/v3/{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60) as answer:
            result: dict[str, object] = json.loads(answer.read() or b"{}")
            return result

    def status(self) -> dict[str, object]:
        """The member's status: dbSize (the file size the quota is checked against), header."""
        return self._call("maintenance/status", {})

    def alarms(self) -> list[str]:
        """The active alarms, e.g. ["NOSPACE"]."""
        return [str(alarm.get("alarm", "")) for alarm in self._alarms()]

    def _alarms(self) -> list[dict[str, object]]:
        found = self._call("maintenance/alarm", {"action": "GET"}).get("alarms")
        if not isinstance(found, list):
            return []
        return [alarm for alarm in found if isinstance(alarm, dict)]

    def revision(self) -> int:
        answer = self._call("kv/range", {"key": base64.b64encode(b"/").decode()})
        header = answer.get("header")
        return int(header.get("revision", 0)) if isinstance(header, dict) else 0

    def free_space(self) -> None:
        """What an operator does after NOSPACE (once data was deleted): compact to the current
        revision, defragment, and disarm every alarm."""
        self._call("kv/compaction", {"revision": self.revision(), "physical": True})
        self._call("maintenance/defragment", {})
        for alarm in self._alarms():
            self._call("maintenance/alarm", {"action": "DEACTIVATE", **alarm})
