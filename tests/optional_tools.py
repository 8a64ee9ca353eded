"""Optional tools: a test that needs one skips on a developer's machine and fails in CI.

`make test` runs without root extras (chromium, faketime, iptables, prometheus...): a test that
needs one skips and says how to get it. `.ci/run` installs them and sets
``DRKIT_TEST_REQUIRE_<NAME>=1``, which turns the same absence into a failure, so a CI machine
that lost a tool cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
from typing import NoReturn

import pytest


def unavailable(requirement: str, why: str, hint: str) -> NoReturn:
    """Fail if ``DRKIT_TEST_REQUIRE_<requirement>=1``, otherwise skip with ``why`` and ``hint``."""
    variable = f"DRKIT_TEST_REQUIRE_{requirement}"
    if os.environ.get(variable) == "1":
        pytest.fail(f"{variable}=1 but {why}")
    pytest.skip(f"{why}: {hint}")


def tool(binary: str, requirement: str, hint: str) -> str:
    """The path of ``binary`` on PATH, or the test is skipped (failed in CI)."""
    found = shutil.which(binary)
    if found is None:
        unavailable(requirement, f"no {binary}", hint)
    return found
