"""The JVM flags drkit gives Spark keep the JIT's code cache at its full size.

CI failed two accounting tests when a test process's Spark driver, run with the quick JIT only,
filled HotSpot's shrunken 48 MB code cache ("Out of space in CodeCache for adapters").
"""

from __future__ import annotations

import re
import subprocess

import pytest

from drkit.accounting.session import CODE_CACHE_ROOM, spark_jvm_options, with_code_cache_room
from drkit.local.jars import java_executable


def reserved_code_cache_mb(options: str) -> int:
    """What a real JVM started with ``options`` reserves for compiled code, in MB."""
    printed = subprocess.run(
        [java_executable(), *options.split(), "-XX:+PrintFlagsFinal", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    found = re.search(r"\bReservedCodeCacheSize\s*=\s*(\d+)", printed)
    assert found, printed[-500:]
    return int(found.group(1)) // (1024 * 1024)


def test_the_quick_jit_alone_would_shrink_the_code_cache() -> None:
    # Why the room is needed: the flag the tests use cuts HotSpot's reservation to 48 MB.
    assert reserved_code_cache_mb("-XX:TieredStopAtLevel=1") < 64


@pytest.mark.parametrize("quick_jit", ["-XX:TieredStopAtLevel=1", "-XX:-TieredCompilation"])
def test_a_spark_jvm_with_the_quick_jit_keeps_the_full_code_cache(
    monkeypatch: pytest.MonkeyPatch, quick_jit: str
) -> None:
    monkeypatch.setenv("DRKIT_SPARK_JVM_OPTIONS", f"-Xss4m {quick_jit}")
    assert reserved_code_cache_mb(spark_jvm_options()) >= 240


def test_options_that_size_the_cache_or_keep_the_full_jit_are_left_as_given() -> None:
    assert with_code_cache_room("") == ""
    assert with_code_cache_room("-Xss4m") == "-Xss4m"
    sized = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m"
    assert with_code_cache_room(sized) == sized
    assert with_code_cache_room("-XX:TieredStopAtLevel=1") == (
        f"-XX:TieredStopAtLevel=1 {CODE_CACHE_ROOM}"
    )
