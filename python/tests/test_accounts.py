"""The caller's own account, its quotas and current use, as an account of
a real coordinator sees them."""

from __future__ import annotations

import os
import subprocess
import uuid

import pytest

import scimesh
from conftest import Coordinator


def add_account(coord: Coordinator, *args: str) -> tuple:
    """Adds an account with `scimesh account add` as the admin; returns its
    name and token."""
    name = "py-" + uuid.uuid4().hex[:8]
    env = dict(os.environ, SCIMESH_COORDINATOR=coord.url, SCIMESH_TOKEN=coord.client_token)
    out = subprocess.run([str(coord.binary), "account", "add", name, *args], env=env, check=True,
                         capture_output=True, text=True)
    return name, out.stdout.strip()


def test_account_of_the_client_token(client: scimesh.Client) -> None:
    a = client.account()
    assert a.name == "admin" and a.admin is True and a.disabled is False
    assert set(client._json("GET", "/account")["usage"]) == {"running", "jobs", "storage_bytes"}  # as sent
    assert a.usage is not None


def test_account_quotas_and_use(coord: Coordinator) -> None:
    name, token = add_account(coord, "--weight", "3", "--max-jobs", "1", "--max-storage", "1KiB")
    c = coord.client(token=token)
    a = c.account()
    assert (a.name, a.admin, a.weight, a.max_jobs, a.max_storage, a.max_running) == (name, False, 3, 1, 1024, 0)
    assert a.usage == scimesh.AccountUsage(running=0, jobs=0, storage_bytes=0)

    job = c.submit(b"id,fingerprint\na,00\n", workload="nobody-runs-this")
    a = c.account()
    assert a.usage.jobs == 1 and a.usage.storage_bytes == len(b"id,fingerprint\na,00\n")
    with pytest.raises(scimesh.APIError) as e:
        c.submit(b"id,fingerprint\nb,00\n", workload="nobody-runs-this")
    assert (e.value.status, e.value.code) == (429, "quota_exceeded") and "max_jobs" in e.value.message
    job.cancel()
    with pytest.raises(scimesh.APIError) as e:
        c.upload(b"id,fingerprint\n" + b"x,00\n" * 300)
    assert (e.value.status, e.value.code) == (429, "quota_exceeded") and "max_storage" in e.value.message
    assert c.account().usage.jobs == 0


def test_account_of_a_refused_token(coord: Coordinator) -> None:
    name, token = add_account(coord)
    env = dict(os.environ, SCIMESH_COORDINATOR=coord.url, SCIMESH_TOKEN=coord.client_token)
    subprocess.run([str(coord.binary), "account", "disable", name], env=env, check=True, capture_output=True)
    with pytest.raises(scimesh.APIError) as e:
        coord.client(token=token).account()
    assert e.value.status == 401


def test_jobs_owner(coord: Coordinator, client: scimesh.Client) -> None:
    name, token = add_account(coord)
    c = coord.client(token=token)
    job = c.submit(b"id,fingerprint\na,00\n", workload="nobody-runs-this")
    try:
        assert job.owner == name
        assert [j.id for j in c.jobs()] == [job.id]
        assert [(j.id, j.owner) for j in client.jobs(owner=name)] == [(job.id, name)]
        assert job.id in {j.id for j in client.jobs()}
    finally:
        job.cancel()
