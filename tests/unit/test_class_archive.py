"""The broker class archive's lifecycle (drkit/local/class_archive.py): recorded by a broker
started without one, kept only when a JVM maps it, mapped by every later start.

The JVM here is the real one (Java is a requirement of the README's set-up); a ``-version``
run records a small archive in a second instead of a broker's minute.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from drkit.local import class_archive
from drkit.local.jars import java_executable


@pytest.fixture
def jars(tmp_path: Path) -> Path:
    directory = tmp_path / "jars" / "kafka-9.9.9"
    directory.mkdir(parents=True)
    return directory


def _record(java: str, jars: Path, broker_dir: Path) -> None:
    """What a broker's JVM does with the flags it is given, on a JVM that only says -version."""
    broker_dir.mkdir(parents=True, exist_ok=True)
    flags = class_archive.broker_flags(jars, java, broker_dir)
    assert flags == [f"-XX:ArchiveClassesAtExit={class_archive.recording_of(broker_dir)}"]
    subprocess.run([java, *class_archive.GC_FLAGS, *flags, "-cp", f"{jars}/*", "-version"],
                   check=True, capture_output=True)  # fmt: skip


def test_a_recording_a_jvm_maps_becomes_the_archive_every_later_start_maps(
    jars: Path, tmp_path: Path
) -> None:
    java = java_executable()
    broker = tmp_path / "broker-1"
    _record(java, jars, broker)
    assert class_archive.recording_of(broker).exists()
    assert class_archive.tool_flags(jars, java) == []  # nothing kept yet: nothing mapped
    assert class_archive.keep_recording(jars, java, broker)
    archive = class_archive.archive_of(jars, java)
    assert archive.exists() and not class_archive.recording_of(broker).exists()
    mapped = [f"-XX:SharedArchiveFile={archive}"]
    assert class_archive.broker_flags(jars, java, tmp_path / "broker-2") == mapped
    assert class_archive.tool_flags(jars, java) == mapped
    # A second recording (a broker started before the first was kept) does not replace it.
    other = tmp_path / "broker-3"
    other.mkdir()
    class_archive.recording_of(other).write_bytes(b"x")
    before = archive.stat().st_ino
    assert not class_archive.keep_recording(jars, java, other)
    assert archive.stat().st_ino == before and not class_archive.recording_of(other).exists()


def test_a_torn_recording_is_dropped_never_kept(jars: Path, tmp_path: Path) -> None:
    """A broker killed while it dumped leaves part of a file; mapped, it would crash every
    broker after it (SIGBUS) - the check refuses it."""
    java = java_executable()
    broker = tmp_path / "broker-1"
    _record(java, jars, broker)
    recording = class_archive.recording_of(broker)
    whole = recording.read_bytes()
    recording.chmod(0o600)
    recording.write_bytes(whole[: len(whole) // 2])
    assert not class_archive.keep_recording(jars, java, broker)
    assert not class_archive.archive_of(jars, java).exists()
    assert not recording.exists()
    # The checking JVM's crash report stays in the broker's directory, not the caller's.
    assert list(broker.glob("class-archive-check-*.log"))
    assert not list(Path.cwd().glob("hs_err*"))


def test_the_archive_is_named_for_its_java_runtime_and_jars(jars: Path, tmp_path: Path) -> None:
    fake_java = tmp_path / "java"
    fake_java.write_text("#!/bin/sh\n")
    first = class_archive.archive_of(jars, str(fake_java))
    assert first.parent == jars.parent and first.name.startswith("kafka-9.9.9.")
    os.utime(fake_java, ns=(1, 1))  # an upgraded JDK: another archive
    assert class_archive.archive_of(jars, str(fake_java)) != first


def test_it_can_be_switched_off(
    jars: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java = java_executable()
    class_archive.archive_of(jars, java).write_bytes(b"")
    monkeypatch.setenv(class_archive.ARCHIVE_SWITCH, "off")
    assert class_archive.broker_flags(jars, java, tmp_path / "broker-1") == []
    assert class_archive.tool_flags(jars, java) == []
