"""Resolve pinned jar bundles from Maven Central with Maven, cached per bundle and version.

A bundle directory is complete once its ``.complete`` marker exists; resolution runs under a file
lock so concurrent ``drkit`` processes (a test run next to ``make demo``) never see half a bundle.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from drkit.config.discovery import cache_dir
from drkit.errors import LocalClusterError

KAFKA_VERSION = "4.1.2"
LOG4J_VERSION = "2.24.3"
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"


@dataclass(frozen=True)
class Artifact:
    group: str
    artifact: str
    version: str


def _log4j() -> tuple[Artifact, ...]:
    # Kafka 4.0-4.2 log through slf4j-api 1.7.x; the binding is not in Kafka's pom.
    return tuple(
        Artifact("org.apache.logging.log4j", name, LOG4J_VERSION)
        for name in ("log4j-slf4j-impl", "log4j-api", "log4j-core")
    )


def bundle_artifacts(bundle: str, version: str | None = None) -> tuple[Artifact, ...]:
    """The root artifacts of a named bundle: ``kafka``, ``mirror-maker``, ``kafka-streams``
    (the library applications link; drkit's tests run a Streams application through a
    failover) or ``spark-kafka``."""
    if bundle == "kafka":
        v = version or KAFKA_VERSION
        return (
            Artifact("org.apache.kafka", "kafka_2.13", v),
            Artifact("org.apache.kafka", "kafka-tools", v),
            *_log4j(),
        )
    if bundle == "mirror-maker":
        v = version or KAFKA_VERSION
        return (Artifact("org.apache.kafka", "connect-mirror", v), *_log4j())
    if bundle == "kafka-streams":
        v = version or KAFKA_VERSION
        return (Artifact("org.apache.kafka", "kafka-streams", v), *_log4j())
    if bundle == "spark-kafka":
        if version is None:
            raise LocalClusterError("the spark-kafka bundle needs the pyspark version")
        return (Artifact("org.apache.spark", "spark-sql-kafka-0-10_2.13", version),)
    raise LocalClusterError(f"unknown jar bundle {bundle!r}")


def _pom(artifacts: tuple[Artifact, ...], pins: tuple[Artifact, ...] = ()) -> str:
    managed = "\n".join(
        f"    <dependency><groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId>"
        f"<version>{a.version}</version></dependency>"
        for a in pins
    )
    deps = "\n".join(
        f"    <dependency><groupId>{a.group}</groupId><artifactId>{a.artifact}</artifactId>"
        f"<version>{a.version}</version></dependency>"
        for a in artifacts
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>drkit.local</groupId>
  <artifactId>jars</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencyManagement><dependencies>
{managed}
  </dependencies></dependencyManagement>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


# Spark's parent POM lists a Google-hosted mirror of Central first.  Where only Maven Central is
# reachable that repository fails, so map it to Central - unless the user has Maven settings of
# their own (a corporate mirror there already decides where artifacts come from).
_SETTINGS = """<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <mirrors>
    <mirror>
      <id>central-for-gcs-mirror</id>
      <mirrorOf>gcs-maven-central-mirror</mirrorOf>
      <url>https://repo.maven.apache.org/maven2</url>
    </mirror>
  </mirrors>
</settings>
"""


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# Transitive artifacts some Maven Central mirrors lack for recent releases, with the newest
# version known to be there.  Used only when resolving the exact version failed; the choice is
# written next to the jars (FALLBACK.txt).  spark-token-provider-kafka is a small module (Kafka
# delegation-token helpers) whose API the connector uses unchanged across 4.x.
_FALLBACK_PINS = {
    "spark-kafka": (Artifact("org.apache.spark", "spark-token-provider-kafka-0-10_2.13", "4.0.0"),),
}


def bundle_dir(bundle: str, version: str | None = None) -> Path:
    artifacts = bundle_artifacts(bundle, version)
    return cache_dir() / "jars" / f"{bundle}-{artifacts[0].version}"


def is_complete(bundle: str, version: str | None = None) -> bool:
    """Whether ``bundle`` is already resolved here (nothing fetched)."""
    return (bundle_dir(bundle, version) / ".complete").exists()


def resolve_bundle(bundle: str, version: str | None = None, quiet: bool = True) -> Path:
    """The directory holding every runtime jar of ``bundle``, resolving it on first use.

    Raises LocalClusterError naming the cause when Maven is missing or resolution fails.
    """
    artifacts = bundle_artifacts(bundle, version)
    target = bundle_dir(bundle, version)
    marker = target / ".complete"
    if marker.exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalClusterError(
            "Maven ('mvn') is not on PATH; it is needed once to fetch Kafka's jars "
            "from Maven Central"
        )
    with _locked(target.with_suffix(".lock")):
        if marker.exists():
            return target
        failure = _maven(mvn, artifacts, (), target, quiet)
        pins = _FALLBACK_PINS.get(bundle, ())
        if failure and pins and any(p.artifact in failure for p in pins):
            failure = _maven(mvn, artifacts, pins, target, quiet)
            if not failure:
                (target / "FALLBACK.txt").write_text(
                    "resolved with pinned fallbacks: "
                    + ", ".join(f"{p.artifact}:{p.version}" for p in pins)
                    + "\n"
                )
        if failure:
            raise LocalClusterError(
                f"Maven could not resolve the {bundle} jars "
                f"({artifacts[0].artifact}:{artifacts[0].version}):\n{failure}"
            )
        marker.write_text("ok\n", encoding="utf-8")
    return target


def _maven(
    mvn: str,
    artifacts: tuple[Artifact, ...],
    pins: tuple[Artifact, ...],
    target: Path,
    quiet: bool,
) -> str | None:
    """Copy the runtime closure into ``target``; the tail of Maven's output on failure."""
    with tempfile.TemporaryDirectory(prefix="drkit-mvn-") as work:
        pom = Path(work) / "pom.xml"
        pom.write_text(_pom(artifacts, pins), encoding="utf-8")
        staging = Path(work) / "jars"
        failure = _run_maven(
            mvn,
            ["-f", str(pom), f"{DEPENDENCY_PLUGIN}:copy-dependencies", "-DincludeScope=runtime",
             f"-DoutputDirectory={staging}"],
            Path(work),
            quiet,
        )  # fmt: skip
        if failure:
            return failure
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(staging), str(target))
    return None


def _run_maven(mvn: str, arguments: list[str], work: Path, quiet: bool) -> str | None:
    """Run Maven in batch mode (Central mirrored for Spark's POM unless the user has Maven
    settings); the tail of its output on failure."""
    command = [mvn, "-B", *(["-q"] if quiet else [])]
    if not (Path.home() / ".m2" / "settings.xml").exists():
        settings = work / "settings.xml"
        settings.write_text(_SETTINGS, encoding="utf-8")
        command += ["-s", str(settings)]
    done = subprocess.run(
        [*command, *arguments],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "MAVEN_OPTS": os.environ.get("MAVEN_OPTS", "-Xmx512m")},
    )
    if done.returncode != 0:
        return "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
    return None


def resolve_distribution(coordinate: str, name: str, quiet: bool = True) -> Path:
    """The directory holding the unpacked zip ``coordinate`` (``group:artifact:version:zip:
    classifier``, e.g. a server's distribution), fetched from Maven Central on first use."""
    target = cache_dir() / "dists" / name
    marker = target / ".complete"
    if marker.exists():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise LocalClusterError(f"Maven ('mvn') is not on PATH; it is needed once to fetch {name}")
    with _locked(target.with_suffix(".lock")):
        if marker.exists():
            return target
        with tempfile.TemporaryDirectory(prefix="drkit-mvn-") as work:
            staging = Path(work) / "dist"
            failure = _run_maven(
                mvn,
                [f"{DEPENDENCY_PLUGIN}:copy", f"-Dartifact={coordinate}",
                 f"-DoutputDirectory={staging}"],
                Path(work),
                quiet,
            )  # fmt: skip
            if failure:
                raise LocalClusterError(f"Maven could not fetch {coordinate}:\n{failure}")
            if target.exists():
                shutil.rmtree(target)
            target.mkdir(parents=True)
            for archive in staging.glob("*.zip"):
                with zipfile.ZipFile(archive) as unpacked:
                    unpacked.extractall(target)
        marker.write_text("ok\n", encoding="utf-8")
    return target


def java_executable() -> str:
    """The ``java`` to run brokers with: ``$JAVA_HOME/bin/java`` or the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise LocalClusterError("Java 17+ is needed for the local Kafka clusters; 'java' not found")
    return found
