"""Guards of the environment itself: without the real binaries it fails loudly (never skips or
substitutes), and a port taken between picking and binding is retried, nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from inner_pytest import fixture_without_binaries

from checkpoint_testenv import binaries, controlplane


def test_locate_refuses_a_folder_without_the_binaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    monkeypatch.setenv(binaries.BIN_ENV, str(tmp_path))
    with pytest.raises(binaries.BinariesMissing, match="kube-apiserver, helm not executable"):
        binaries.locate()


def test_control_plane_fixture_errors_instead_of_skipping(tmp_path: Path) -> None:
    output = fixture_without_binaries(tmp_path, "control_plane", binaries.BIN_ENV)
    assert "test control plane unavailable" in output


def test_start_retries_on_new_ports_only_when_a_port_was_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tried: list[tuple[int, Path]] = []

    def start(plane: controlplane.ControlPlane) -> None:
        tried.append((plane.etcd_client_port, plane.workdir))
        if len(tried) == 1:
            raise RuntimeError("etcd exited: bind: address already in use")

    monkeypatch.setattr(controlplane.ControlPlane, "start", start)
    plane = controlplane.start_control_plane(tmp_path, tmp_path / "cp")
    assert len(tried) == 2
    assert tried[0][1] != tried[1][1]
    assert plane.workdir == tried[1][1]

    def broken(plane: controlplane.ControlPlane) -> None:
        raise RuntimeError("kube-apiserver exited with 1: bad flag")

    monkeypatch.setattr(controlplane.ControlPlane, "start", broken)
    with pytest.raises(RuntimeError, match="bad flag"):
        controlplane.start_control_plane(tmp_path, tmp_path / "cp2")
