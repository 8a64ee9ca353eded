"""A state-store URL is shown (``drkit db``, /healthz, /api/status, logs, errors) with every
credential masked: the password in its user part and one given as a query parameter, which
libpq and psycopg accept just as well (issue 46, medium 6)."""

from __future__ import annotations

import pytest

from drkit.errors import StateStoreError
from drkit.store import StateStore
from drkit.store.db import safe_url

SECRET = "s3cr3t-Value"


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql+psycopg://drkit:{SECRET}@db.example:5432/drkit",
        f"postgresql+psycopg://drkit@db.example/drkit?password={SECRET}&sslmode=require",
        f"postgresql+psycopg://drkit@db.example/drkit?sslmode=verify-full&sslpassword={SECRET}",
    ],
)
def test_every_credential_in_a_store_url_is_masked(url: str) -> None:
    shown = safe_url(url)
    assert SECRET not in shown, shown
    assert shown.startswith("postgresql+psycopg://drkit") and "db.example" in shown
    if "sslmode" in url:
        assert "sslmode=" in shown  # what is not a secret stays readable


def test_a_store_that_fails_names_its_url_without_the_password_given_as_a_parameter() -> None:
    # Nothing listens on port 1: the connection fails at once, and the error names the store.
    store = StateStore(f"postgresql+psycopg://drkit@127.0.0.1:1/drkit?password={SECRET}"
                       "&connect_timeout=2")  # fmt: skip
    with pytest.raises(StateStoreError) as failed:
        store.upgrade()
    assert "127.0.0.1" in str(failed.value) and SECRET not in str(failed.value), failed.value
