"""What the transport says about the token (a real coordinator)."""

from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path

import pytest

import scimesh
from conftest import Coordinator


def non_loopback_ip() -> str:
    """An IPv4 address of this machine that is not loopback (the one its
    default route leaves from); skips, or fails under CI, without one."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # no packet is sent: this only picks a route
            ip = s.getsockname()[0]
    except OSError:
        ip = ""
    if not ip or ip.startswith("127.") or ip == "0.0.0.0":
        msg = "this machine has no network address but loopback: the test of a remote address cannot run"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    return ip


def test_plain_http_warning(binary: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A token sent over plain http to an address that is not loopback is
    warned about once per process and address, over many calls and
    clients; loopback, localhost, and calls without a token say nothing."""
    ip = non_loopback_ip()
    coord = Coordinator(binary, tmp_path, addr="0.0.0.0:0")
    try:
        port = urllib.parse.urlsplit(coord.url).port
        remote = f"http://{ip}:{port}"
        for base in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
            c = scimesh.Client(base, token=coord.client_token)
            c.jobs()
            c.jobs()
        with pytest.raises(scimesh.APIError) as e:
            scimesh.Client(remote, token="").jobs()
        assert e.value.status == 401
        assert capsys.readouterr().err == ""

        for _ in range(2):
            c = scimesh.Client(remote, token=coord.client_token)
            for _ in range(3):
                c.jobs()
        err = capsys.readouterr().err
        assert err.count("warning: sending the token over plain http to") == 1, err
        assert f"to {ip}:{port};" in err and "use https" in err, err
    finally:
        coord.stop()
