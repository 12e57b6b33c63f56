"""A real S3-compatible server for the object-store tests: SeaweedFS's `weed server -s3`.

The binary comes from scripts/testenv/build-s3.sh (built from the Go module at the version
pinned in scripts/testenv/s3-server/go.mod, cached per pin), or from the folder named by
CHECKPOINT_S3_SERVER_BIN. A missing binary is an error, never a reason to skip.

One process runs the master, a volume server, the filer and the S3 gateway, all on one address
(127.0.0.1, or e.g. the test node link's host address) with free ports, a temporary data folder,
and one S3 identity whose key pair is made up per server. Telemetry is switched off: the server
talks to nobody but its clients.
"""

from __future__ import annotations

import atexit
import itertools
import json
import secrets
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import botocore.config
import botocore.session

from checkpoint_testenv.binaries import REPO_ROOT, locate_built
from checkpoint_testenv.controlplane import free_port
from checkpoint_testenv.processes import ManagedProcess, wait_until

BIN_ENV = "CHECKPOINT_S3_SERVER_BIN"
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-s3.sh"
REGION = "us-east-1"
_START_TIMEOUT = 120.0
_UPLOAD_THREADS = 8


@cache
def locate() -> Path:
    """The folder holding `weed`, building it if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, ("weed",))


@dataclass(frozen=True)
class S3Credentials:
    access_key: str
    secret_key: str


class S3Server:
    """One `weed server -s3` process and a client with its credentials."""

    def __init__(self, weed: Path, workdir: Path, host: str = "127.0.0.1") -> None:
        self.weed = weed
        self.workdir = workdir
        self.host = host  # e.g. the test node link's host address, which the node's pods reach
        self.port = free_port()
        self.endpoint = f"http://{host}:{self.port}"
        self.credentials = S3Credentials(
            access_key="CR" + secrets.token_hex(9).upper(), secret_key=secrets.token_hex(20)
        )
        self.startups: list[float] = []
        """Seconds from spawning until ready, one entry per start (restarts included)."""
        self._names = itertools.count(1)
        self._client: Any = None
        self._process = ManagedProcess("weed server -s3", self._argv(), workdir / "weed.log")

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Write the identity file, start the server, and wait until an upload succeeds."""
        identities = {
            "identities": [
                {
                    "name": "checkpoint-test",
                    "credentials": [
                        {
                            "accessKey": self.credentials.access_key,
                            "secretKey": self.credentials.secret_key,
                        }
                    ],
                    "actions": ["Admin", "Read", "List", "Tagging", "Write"],
                }
            ]
        }
        (self.workdir / "s3.json").write_text(json.dumps(identities))
        (self.workdir / "data").mkdir(exist_ok=True)
        if not self.startups:
            atexit.register(self.stop)
        self._process.start()
        seconds = wait_until(self._accepts_uploads, self._process, _START_TIMEOUT, "ready")
        self.startups.append(seconds)

    def stop(self) -> None:
        """Shut the server down; safe to call more than once."""
        self._process.stop(timeout=5.0)

    @property
    def running(self) -> bool:
        return self._process.running

    def _argv(self) -> list[str]:
        ports = {
            "master.port": free_port(),
            "master.port.grpc": free_port(),
            "volume.port": free_port(),
            "volume.port.grpc": free_port(),
            "filer.port": free_port(),
            "filer.port.grpc": free_port(),
            "s3.port": self.port,
            "s3.port.grpc": free_port(),
            "s3.port.iceberg": 0,
            "s3.port.lance": 0,
        }
        data = self.workdir / "data"
        return [
            str(self.weed),
            "server",
            "-s3",
            "-filer",
            f"-ip={self.host}",
            f"-ip.bind={self.host}",
            f"-dir={data}",
            "-master.telemetry=false",
            # Many small buckets (one per test): small volumes, as many as the disk allows.
            "-master.volumeSizeLimitMB=64",
            "-volume.max=0",
            f"-s3.config={self.workdir / 's3.json'}",
            f"-s3.localSocket={self.workdir / 's3.sock'}",
            f"-filer.localSocket={self.workdir / 'filer.sock'}",
            *(f"-{flag}={port}" for flag, port in ports.items()),
        ]

    # ---- clients ---------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        """The environment a client (the runtime) reads its S3 credentials from."""
        return {
            "AWS_ACCESS_KEY_ID": self.credentials.access_key,
            "AWS_SECRET_ACCESS_KEY": self.credentials.secret_key,
            "AWS_DEFAULT_REGION": REGION,
            # Never ask the cloud metadata address for credentials.
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def client(self) -> Any:
        """A botocore S3 client with the server's credentials (thread-safe, reused)."""
        if self._client is None:
            session = botocore.session.get_session()
            self._client = session.create_client(
                "s3",
                region_name=REGION,
                endpoint_url=self.endpoint,
                aws_access_key_id=self.credentials.access_key,
                aws_secret_access_key=self.credentials.secret_key,
                config=botocore.config.Config(
                    s3={"addressing_style": "path"},
                    retries={"max_attempts": 3, "mode": "standard"},
                    max_pool_connections=_UPLOAD_THREADS * 2,
                ),
            )
        return self._client

    def create_bucket(self, prefix: str = "t") -> str:
        """A bucket no other test has used."""
        name = f"{prefix}-{next(self._names)}-{secrets.token_hex(3)}"
        self.client().create_bucket(Bucket=name)
        return name

    def put(self, bucket: str, key: str, body: bytes) -> None:
        self.client().put_object(Bucket=bucket, Key=key, Body=body)

    def put_many(self, bucket: str, objects: Iterable[tuple[str, bytes]]) -> int:
        """Upload in parallel; how many objects were uploaded."""
        items = list(objects)
        with ThreadPoolExecutor(_UPLOAD_THREADS) as pool:
            for _ in pool.map(lambda item: self.put(bucket, *item), items):
                pass
        return len(items)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        """Every key under `prefix`, through the server's own pagination."""
        paginator = self.client().get_paginator("list_objects_v2")
        found: list[str] = []
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
            found += [item["Key"] for item in page.get("Contents", [])]
        return found

    def _accepts_uploads(self) -> bool:
        """Ready once the gateway authenticates us and the volume server takes a write."""
        try:
            client = self.client()
            if "ready" not in {b["Name"] for b in client.list_buckets().get("Buckets", [])}:
                client.create_bucket(Bucket="ready")
            client.put_object(Bucket="ready", Key="probe", Body=b"ok")
            return bool(client.get_object(Bucket="ready", Key="probe")["Body"].read() == b"ok")
        except Exception:  # not up yet: connection refused, 5xx, no writable volume yet
            return False


def start_s3_server(
    weed: Path, workdir: Path, attempts: int = 3, host: str = "127.0.0.1"
) -> S3Server:
    """Start an S3Server, retrying on new ports only when one was taken in between."""
    for attempt in range(1, attempts + 1):
        folder = workdir / f"attempt-{attempt}" if attempt > 1 else workdir
        folder.mkdir(parents=True, exist_ok=True)
        server = S3Server(weed, folder, host)
        try:
            server.start()
        except RuntimeError as failure:
            server.stop()
            if "address already in use" not in str(failure) or attempt == attempts:
                raise
            continue
        except BaseException:
            server.stop()
            raise
        return server
    raise AssertionError("unreachable")
