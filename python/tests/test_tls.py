"""The client and a worker against `scimesh serve --tls-cert --tls-key`
with a certificate of a private authority, made here with openssl."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Iterator, Tuple

import pytest

import scimesh
from conftest import Coordinator
from helpers import fingerprints, parse, tanimoto_top, write_fingerprints


def make_certs(dir: Path) -> Tuple[Path, Path, Path]:
    """A private authority (ca.pem) and a server certificate it signed for
    localhost and 127.0.0.1 (cert.pem, key.pem)."""
    openssl = shutil.which("openssl")
    if openssl is None:
        msg = "openssl is not installed (apt-get install openssl): cannot make test certificates"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    ext = dir / "server.ext"
    ext.write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
        "basicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n"
    )
    for args in (
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=SciMesh test CA"],
        ["req", *ec, "-keyout", "key.pem", "-out", "server.csr", "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "cert.pem", "-days", "1", "-extfile", str(ext)],
    ):
        subprocess.run([openssl, *args], cwd=dir, check=True, capture_output=True)
    return dir / "ca.pem", dir / "cert.pem", dir / "key.pem"


@pytest.fixture(scope="module")
def tls_coord(binary: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    """A coordinator that serves over TLS, and a tanimoto worker trusting
    its authority through SSL_CERT_FILE."""
    dir = tmp_path_factory.mktemp("tls")
    ca, cert, key = make_certs(dir)
    c = Coordinator(binary, dir, serve_args=["--tls-cert", str(cert), "--tls-key", str(key)], ca=ca)
    try:
        c.worker("tls-w", "tanimoto")
        yield c
    finally:
        c.stop()


def test_job_over_tls(tls_coord: Coordinator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert tls_coord.url.startswith("https://127.0.0.1:")
    rows, query = fingerprints(600, seed=3)
    path = tmp_path / "fps.csv"
    write_fingerprints(path, rows)
    # The authority from the environment...
    monkeypatch.setenv("SCIMESH_CA_CERT", str(tls_coord.ca))
    with scimesh.Client(tls_coord.url, token=tls_coord.client_token) as c:
        job = c.submit(path, workload="tanimoto", top_k=10, params={"query": query}, chunk_rows=150)
        assert parse(job.wait(progress=False, timeout=60).result()) == tanimoto_top(rows, query, 10)
    # ...or from ca_cert=, which wins over it.
    monkeypatch.setenv("SCIMESH_CA_CERT", str(tmp_path / "missing.pem"))
    with scimesh.Client(tls_coord.url, token=tls_coord.client_token, ca_cert=tls_coord.ca) as c:
        assert c.job(job.id).status == "completed"


def test_untrusted_certificate_is_refused(tls_coord: Coordinator, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCIMESH_CA_CERT", raising=False)
    c = scimesh.Client(tls_coord.url, token=tls_coord.client_token)
    began = time.monotonic()
    with pytest.raises(scimesh.NetworkError) as e:
        c.jobs()
    assert "CERTIFICATE_VERIFY_FAILED" in str(e.value) and "SCIMESH_CA_CERT" in str(e.value)
    assert time.monotonic() - began < 2, "a certificate error was retried"


def test_unreadable_ca_file(tls_coord: Coordinator, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot read the CA certificate"):
        scimesh.Client(tls_coord.url, ca_cert=tmp_path / "missing.pem")
