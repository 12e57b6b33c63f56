"""The S3 server fixture fails loudly without `weed` (never skips), and the server it starts is
the real one: it refuses a request signed with a key it does not know."""

from __future__ import annotations

from pathlib import Path

import botocore.session
import pytest
from botocore.exceptions import ClientError
from inner_pytest import fixture_without_binaries

from checkpoint_testenv import s3server
from checkpoint_testenv.s3server import S3Server


def test_s3_server_fixture_errors_instead_of_skipping(tmp_path: Path) -> None:
    output = fixture_without_binaries(tmp_path, "s3_bucket", s3server.BIN_ENV)
    assert "S3 test server unavailable: weed not executable" in output


def test_the_server_authenticates_and_lists_in_pages(s3_server: S3Server, s3_bucket: str) -> None:
    s3_server.put_many(s3_bucket, [(f"k-{index:04d}", b"x") for index in range(1_001)])
    assert len(s3_server.keys(s3_bucket)) == 1_001
    impostor = botocore.session.get_session().create_client(
        "s3",
        region_name=s3server.REGION,
        endpoint_url=s3_server.endpoint,
        aws_access_key_id=s3_server.credentials.access_key,
        aws_secret_access_key="not-the-secret",
    )
    with pytest.raises(ClientError, match=r"SignatureDoesNotMatch|AccessDenied"):
        impostor.list_objects_v2(Bucket=s3_bucket)
