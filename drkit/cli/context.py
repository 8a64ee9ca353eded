"""Per-invocation context shared by subcommands: state dir, config, state store."""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from drkit import json_codec, logs
from drkit.config import DrkitConfig, load_config, resolve_config_path
from drkit.config.discovery import state_dir
from drkit.config_checks import CONFIG_CHECKS
from drkit.listening import TlsFiles
from drkit.private_files import private_dir
from drkit.timestamps import iso_utc

_CLI_LOG = logging.getLogger("drkit.cli")


class _Seconds(click.ParamType[float]):
    """A duration option: a finite number of seconds above 0 and at most an hour (a negative,
    NaN or infinite timeout reached the socket layer as a traceback)."""

    name = "seconds"

    def __init__(self, minimum: float = 0.0, why: str = "") -> None:
        self.minimum = minimum  # 0: any positive duration
        self._why = why

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(seconds) or not 0 < seconds <= 3600:
            self.fail(f"{value!r}: give seconds above 0 and at most 3600", param, ctx)
        if seconds < self.minimum:
            self.fail(f"{value!r}: give at least {self.minimum:g}s{self._why}", param, ctx)
        return seconds


class FiniteRange(click.FloatRange):
    """click.FloatRange that refuses NaN and infinity: every comparison with NaN is false, so
    FloatRange let ``--quiet nan`` through ("wrote nothing to dc2 for nans") and ``--wait nan``
    or ``--commit-interval nan`` reach the clocks (issue 45, sixth trial)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


SECONDS = _Seconds()
# A cluster check's --timeout: below a second no Kafka round trip and login fits, and every
# cluster would be reported down (issue 45, W5).
CHECK_SECONDS = _Seconds(1.0, " (a Kafka round trip and login take that long)")
check_timeout_option = click.option(
    "--timeout",
    type=CHECK_SECONDS,
    default=10.0,
    show_default=True,
    help="Seconds the check of each cluster may take, at least 1; the clusters are checked at "
    "once, so this bounds the whole command's wait.",
)


class _Text(click.ParamType[str]):
    """A name or a reason the operator types: not empty, and without control characters
    (Kafka's client refuses an empty group id with a traceback; a newline in a reason forged
    lines in ``flows list``)."""

    def __init__(
        self, name: str, pattern: str | None = None, form: str = "", longest: int = 0
    ) -> None:
        self.name = name
        self._pattern = re.compile(pattern) if pattern else None
        self._form = form
        self._longest = longest  # 0: no cap

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if not text.strip():
            article = "an" if self.name[0] in "aeiou" else "a"  # "an id", not "a id"
            self.fail(f"{article} {self.name} cannot be empty", param, ctx)
        if self._longest and len(text) > self._longest:
            self.fail(
                f"a {self.name} of {len(text):,} characters: at most {self._longest:,}", param, ctx
            )
        if any(not c.isprintable() for c in text):
            self.fail(f"{text!r}: no control characters (newlines, escapes)", param, ctx)
        if self._pattern is not None and not self._pattern.fullmatch(text):
            self.fail(f"{text!r} is not {self._form}", param, ctx)
        return text


GROUP = _Text("group name")
TOPIC = _Text("topic name")
# A reason is stored with each pause, fence and failover and shown in lists: a sentence or
# two, not a 100 kB paste.
REASON = _Text("reason", longest=1000)
PRINCIPAL = _Text("principal", r"[A-Za-z]+:[^:\s]\S*", "a principal (User:name)")
# An id other processes see (an observer, a worker): an empty one became the host name in
# silence, a blank one made two ids that look the same.
IDENTITY = _Text("id", r"\S+", "an id without spaces")
HOST_NAME = _Text("host name", r"[^\s/]+", "a host name (no spaces, no scheme or path)")
# An Alembic revision: an empty one failed an assertion inside alembic (a traceback).
REVISION = _Text("revision")


class _StoredId(click.IntRange):
    """A stored id typed on the command line (a failover run, a drill, an automatic failover
    to acknowledge): SQLite's INTEGER range - a larger one was an OverflowError traceback.  A
    word is named as not such an id, with where the ids are listed (Click said "'abc' is not a
    valid integer range")."""

    def __init__(self, what: str = "an id", listed: str = "") -> None:
        super().__init__(1, 2**63 - 1)
        self._what, self._listed = what, listed

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if not (isinstance(value, int) or str(value).strip().lstrip("+-").isdigit()):
            where = f"; {self._listed}" if self._listed else ""
            self.fail(f"{str(value)!r} is not {self._what} (a number{where})", param, ctx)
        return int(super().convert(value, param, ctx))


STORED_ID = _StoredId()
RUN_ID = _StoredId("a run id", "drkit failover list shows them")


def chosen_clusters(config: DrkitConfig, aliases: tuple[str, ...]) -> list[str]:
    """The clusters ALIASES name (all when none is given); an alias the config lacks is
    refused naming it quoted - '' and ' dc1 ' are visible so - and the configured ones."""
    unknown = [a for a in aliases if a not in config.clusters]
    if unknown:
        names = ", ".join(repr(a) for a in unknown)
        known = ", ".join(sorted(config.clusters))
        what = "cluster" if len(unknown) == 1 else "clusters"
        raise click.BadParameter(
            f"unknown {what} {names} (clusters: {known})", param_hint="ALIASES"
        )
    return list(aliases) or sorted(config.clusters)


def say(message: str, level: int = logging.INFO, **fields: object) -> None:
    """A line for the operator on stderr (stdout stays the command's output or document).

    As text: ``message`` prefixed ``error: `` at ERROR, ``warning: `` at WARNING.  Under
    ``--log-format json``: a log record of logger ``drkit.cli`` with ``fields``, so a reader of
    stderr meets nothing but JSON objects, errors included.
    """
    if logs.json_lines():
        _CLI_LOG.log(level, message, extra=fields)
        return
    prefix = (
        "error: " if level >= logging.ERROR else "warning: " if level >= logging.WARNING else ""
    )
    click.echo(prefix + message, err=True)


@dataclass
class AppContext:
    state_dir_option: str | None = None
    _config: DrkitConfig | None = field(default=None, repr=False)
    config_path: Path | None = None

    @property
    def state_dir(self) -> Path:
        return state_dir(self.state_dir_option)

    def config(self, explicit: str | None = None) -> DrkitConfig:
        """Load (once) the config chosen by ``explicit`` > env > ./drkit.yaml > local default."""
        if self._config is None:
            if explicit and not os.path.lexists(explicit):
                # Quoted: a path with a stray space read "error:  : file not found".
                from drkit.errors import ConfigError, Problem

                raise ConfigError([Problem("--config", f"{explicit!r}: file not found")])
            self.config_path = resolve_config_path(explicit, self.state_dir)
            self._config = load_config(self.config_path, checks=CONFIG_CHECKS)
        return self._config

    def store_url(self, config: DrkitConfig | None) -> str:
        """The state store's URL for ``config``; one the operator named (config,
        $DRKIT_DB_URL) that points into a missing directory is refused (ConfigError), the
        state dir's default is created."""
        from drkit.store import database_url
        from drkit.store.db import default_database_url, refuse_missing_sqlite_directory

        url = database_url(config, self.state_dir)
        if url != default_database_url(self.state_dir):  # $DRKIT_DB_URL or the config's
            refuse_missing_sqlite_directory(url)
        return url

    def store(  # type: ignore[no-untyped-def]
        self, explicit_config: str | None = None, config_required: bool = False,
        reading: bool = False,
    ):  # fmt: skip
        """The state store for the chosen config, or the state-dir default when there is no
        config file at all.  A config file that exists but is invalid - given or found
        ($DRKIT_CONFIG, ./drkit.yaml, the state dir's) - is an error, never a silent fallback
        to the default SQLite store.

        ``reading``: the command only reports what is stored, so a state dir named explicitly
        (--state-dir, $DRKIT_STATE_DIR) that does not exist is a typo to report, not a fresh
        empty store to answer "nothing yet" from."""
        from drkit.errors import ConfigError, Problem
        from drkit.store import StateStore, database_url

        if explicit_config is None and self.config_path is not None:
            explicit_config = str(self.config_path)  # loaded already (a group's --config)
        config: DrkitConfig | None = None
        try:
            resolve_config_path(explicit_config, self.state_dir)
        except ConfigError:  # no config file anywhere
            if config_required:
                raise
        else:
            config = self.config(explicit_config)
        url = self.store_url(config)
        explicit = self.state_dir_option or os.environ.get("DRKIT_STATE_DIR")
        default = url == database_url(None, self.state_dir)
        if reading and explicit and default and not self.state_dir.exists():
            raise ConfigError(
                [Problem("--state-dir", f"{self.state_dir} does not exist (a typo?): nothing "
                         "has run with this state dir, so there is nothing to show")]
            )  # fmt: skip
        if default:
            try:
                private_dir(self.state_dir)  # the store, exports, drills: drkit's user only
            except OSError as err:
                raise ConfigError(
                    [Problem("--state-dir", f"cannot create {self.state_dir}: {err.strerror}")]
                ) from None
        return StateStore(url)


def confirm(question: str, yes: bool) -> None:
    """Ask ``question`` on the terminal unless ``yes``; without a terminal to ask on, refuse
    (exit 2, nothing done) rather than read an answer from a pipe.  A "no" aborts (exit 1)."""
    import sys

    from drkit.errors import ConfigError, Problem

    if yes:
        return
    if not sys.stdin.isatty():
        raise ConfigError([Problem("--yes", "not a terminal: confirm with --yes")])
    click.confirm(f"\n{question}", abort=True, err=True)


def writable_file(option: str, path: str) -> Path:
    """``path`` (the value of ``option``) when a file can be written there - its directory
    exists - else ConfigError naming the option, before any work is done."""
    from drkit.errors import ConfigError, Problem

    if not path.strip():  # Path("") is "." - a directory that exists
        raise ConfigError([Problem(option, "an empty path: name a file")])
    target = Path(path)
    parent = target.parent if str(target.parent) else Path()
    if not parent.is_dir():  # never created: a typo would put the file out of sight
        what = "is not a directory" if parent.exists() else "does not exist (create it first)"
        raise ConfigError([Problem(option, f"cannot write {path}: {parent} {what}")])
    return target


def write_file(option: str, path: Path, text: str) -> None:
    """Write ``text`` to ``path``; an OS refusal is ConfigError naming ``option`` and why."""
    from drkit.errors import ConfigError, Problem

    try:
        path.write_text(text, encoding="utf-8")
    except OSError as err:
        raise ConfigError([Problem(option, f"cannot write {path}: {err.strerror}")]) from None


def _not_empty(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """An empty or blank --config is refused, as an empty --state-dir is: "" read as "not
    given" and the state dir's config was used in silence."""
    if value is not None and not value.strip():
        raise click.BadParameter("cannot be empty", param=param)
    return value


def config_option(func: Any) -> Any:
    """``--config FILE`` (env DRKIT_CONFIG) for commands that read the drkit config."""
    return click.option(
        "--config",
        "config_file",
        envvar="DRKIT_CONFIG",
        type=click.Path(dir_okay=False),
        callback=_not_empty,
        help="drkit config file [env DRKIT_CONFIG; default ./drkit.yaml, then the one "
        "'drkit local up' wrote].",
    )(func)


def tls_options(serves: str) -> Callable[[Any], Any]:
    """``--tls-cert``/``--tls-key``: the listener(s) named by ``serves`` speak HTTPS only."""

    def decorate(func: Any) -> Any:
        func = click.option(
            "--tls-key",
            type=click.Path(dir_okay=False),
            default=None,
            help="The certificate's PEM private key (with --tls-cert).",
        )(func)
        return click.option(
            "--tls-cert",
            type=click.Path(dir_okay=False),
            default=None,
            help=f"PEM certificate (chain): serve {serves} over HTTPS only (with --tls-key).",
        )(func)

    return decorate


def tls_files(certificate: str | None, key: str | None) -> TlsFiles | None:
    """The HTTPS listener's files, both or neither, checked (refused otherwise, exit 2)."""
    from drkit.errors import ConfigError, Problem

    if certificate is None and key is None:
        return None
    if certificate is None or key is None:
        given, missing = ("--tls-cert", "--tls-key") if key is None else ("--tls-key", "--tls-cert")
        raise ConfigError([Problem(missing, f"{given} needs {missing}: HTTPS takes both")])
    files = TlsFiles(certificate, key)
    files.check()
    return files


def output_option(func: Any) -> Any:
    return click.option(
        "--output",
        "-o",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="Output format.",
    )(func)


# Above this, documents are printed on one line: Python's JSON encoder only uses its C
# implementation without indentation, and a failover run of 10,000 groups is ~100 MB indented.
INDENT_LIMIT_BYTES = 1_000_000


@dataclass
class _Printed:
    """Whether this command put a JSON document on stdout (an error then adds none)."""

    document: bool = False


PRINTED = _Printed()


def echo_json(payload: Any) -> None:
    """``payload`` as JSON on stdout: indented, or on one line when it is large."""
    PRINTED.document = True
    compact = json_codec.dumps_sorted(payload)
    if len(compact) > INDENT_LIMIT_BYTES:
        click.echo(compact)
        return
    click.echo(json.dumps(payload, indent=2, sort_keys=True, default=str))


def echo_document(kind: str, data: dict[str, Any]) -> None:
    """Print ``data`` in drkit's JSON envelope: ``schema`` (``drkit.<kind>/v1``; fields are only
    ever added within a version) and ``generated_at`` (ISO-8601 UTC) beside the data."""
    echo_json({"schema": f"drkit.{kind}/v1", "generated_at": iso_utc(datetime.now(UTC)), **data})


pass_app = click.make_pass_decorator(AppContext)


def operator() -> str:
    """Who runs this command, as recorded in the audit trail: ``cli:<user>``."""
    import getpass

    try:
        return f"cli:{getpass.getuser()}"
    except (KeyError, OSError):
        return "cli"


# -- shell completion (click's _DRKIT_COMPLETE=bash_source|zsh_source|fish_source) ------------


def _completion_config() -> DrkitConfig | None:
    """The config a command would use, for completion: never an error on the terminal."""
    try:
        return load_config(resolve_config_path(None, state_dir(None)), checks=CONFIG_CHECKS)
    except Exception:  # completion must stay silent whatever is wrong
        return None


def complete_clusters(_ctx: Any, _param: Any, incomplete: str) -> list[str]:
    """Cluster aliases of the config, for --from/--to/--cluster."""
    config = _completion_config()
    return [a for a in sorted(config.clusters) if a.startswith(incomplete)] if config else []


def complete_flows(_ctx: Any, _param: Any, incomplete: str) -> list[str]:
    """The config's flows for --flow, as ``source:target`` - the form that needs no shell
    quoting (``source->target`` unquoted is a redirection: Enter would write a file)."""
    config = _completion_config()
    names = [f"{f.source}:{f.target}" for f in config.flows] if config else []
    return [n for n in names if n.startswith(incomplete)]


def complete_runs(_ctx: Any, _param: Any, incomplete: str) -> list[str]:
    """Failover run ids in the store, newest first, for RUN."""
    try:
        from drkit.failover.runs import RunRepository
        from drkit.store import StateStore, database_url

        store = StateStore(database_url(_completion_config(), state_dir(None)))
        runs = RunRepository(store).latest(20)
    except Exception:  # no store yet, or it is down: nothing to offer
        return []
    return [str(r.id) for r in runs if str(r.id).startswith(incomplete)]
