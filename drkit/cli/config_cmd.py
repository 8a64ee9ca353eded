"""``drkit config``: validate and show configuration files."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import click
import yaml

from drkit.cli.context import (
    AppContext,
    config_option,
    echo_document,
    output_option,
    pass_app,
    say,
    writable_file,
    write_file,
)
from drkit.config import load_config
from drkit.config.secrets import redacted_dump
from drkit.config_checks import CONFIG_CHECKS
from drkit.errors import ConfigError, Problem
from drkit.timestamps import iso_utc


@click.group("config")
def config() -> None:
    """Check and inspect drkit configuration."""


@config.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@output_option
def validate(file: str, output: str) -> None:
    """Validate FILE: exit 0 when good, else one line per problem (key path: reason).

    Beyond the config's own rules, what the Kafka clients would refuse: librdkafka is given
    each cluster's client settings (drkit's and each role's) to build a client from - nothing
    is sent to a cluster - and the TLS files they name and the runbooks_dir must be there to
    read.  Warnings (stderr, exit 0): weak security settings, secrets written out in the file,
    hooks whose program cannot start on this machine."""
    from drkit.config.loader import read_text_file
    from drkit.config.secrets import hook_secret_warnings, literal_secret_warnings
    from drkit.config.security import security_warnings
    from drkit.drills.schedule import schedule_problems
    from drkit.failover.hooks import hook_start_problem
    from drkit.kafka.client_check import client_problems

    try:
        loaded = load_config(file, checks=CONFIG_CHECKS)
        problems = schedule_problems(loaded) + client_problems(loaded)
        runbooks = loaded.failover.runbooks_dir
        if runbooks is not None and not Path(runbooks).is_dir():
            problems.append(Problem("failover.runbooks_dir", (
                f"{runbooks} is not a directory: the failover runbooks are read from it (a "
                "relative path from where drkit runs)"
            )))  # fmt: skip
        if problems:
            raise ConfigError(problems, source=file)
    except ConfigError as err:
        if output == "json":  # the verdict on stdout too: a reader never gets an empty answer
            lines = [str(problem) for problem in err.problems]
            echo_document("config.validate", {"file": file, "ok": False, "problems": lines})
        raise
    warnings = security_warnings(loaded)
    written = yaml.safe_load(read_text_file(file))  # as written, before ${VAR} expansion
    warnings += literal_secret_warnings(written) + hook_secret_warnings(written)
    for index, hook in enumerate(loaded.failover.hooks):
        if (why := hook_start_problem(hook)) is not None:
            then = ("a before hook that cannot start vetoes its step" if hook.when == "before"
                    else "an after hook that cannot start is reported failed")  # fmt: skip
            warnings.append(f"failover.hooks[{index}].command: {why} - {then}")
    if output == "json":
        summary = {"file": file, "ok": True, "clusters": sorted(loaded.clusters),
                   "flows": [f.name for f in loaded.flows], "warnings": warnings}  # fmt: skip
        echo_document("config.validate", summary)
        return
    for warning in warnings:  # valid, but weaker than it looks: said, not refused
        say(warning, logging.WARNING)
    click.echo(f"{file}: ok ({len(loaded.clusters)} clusters, {len(loaded.flows)} flows)")


@config.command("show")
@config_option
@output_option
@pass_app
def show(app: AppContext, config_file: str | None, output: str) -> None:
    """Print the effective config (YAML; ``-o json``: a ``drkit.config/v1`` document) with
    defaults filled in and secrets masked (passwords, the state-store URL, webhook URLs and
    client_overrides whose names look secret)."""
    loaded = app.config(config_file)
    shown = redacted_dump(loaded)
    if output == "json":
        echo_document("config", {"file": str(app.config_path), "config": shown})
        return
    click.echo(f"# {app.config_path}")
    click.echo(yaml.safe_dump(shown, sort_keys=False, allow_unicode=True), nl=False)


@config.command("import")
@click.argument("mm2_file", metavar="MM2_PROPERTIES", type=click.Path(dir_okay=False))
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Write the drkit config here (refused if the file exists); default: standard output.",
)
@output_option
def import_mm2_config(mm2_file: str, out: str | None, output: str) -> None:
    """Turn a MirrorMaker 2 configuration (mm2.properties) into a commented drkit config.

    Every MM2 key is either mapped (the comment says where) or listed as not carried over with
    the reason and what to do.  Secrets are never copied: each becomes a ${ENV} reference, and
    the variables to set are listed.  The result is validated before it is written."""
    from drkit.adoption.mm2_config import import_mm2, render
    from drkit.config.loader import load_config_text, read_text_file

    target = writable_file("--out", out) if out is not None else None  # before any work
    if target is not None and target.exists():
        raise ConfigError([Problem("--out", f"{out} exists: choose another path")])
    imported = import_mm2(read_text_file(mm2_file))
    if not imported.document["clusters"]:
        raise ConfigError([Problem("clusters", "no cluster aliases (clusters = A, B)")],
                          source=mm2_file)  # fmt: skip
    text = render(imported, mm2_file, iso_utc(datetime.now(UTC)))
    placeholders = dict.fromkeys(imported.env, "placeholder")
    load_config_text(text, source=f"{mm2_file} (imported)", env=placeholders, checks=CONFIG_CHECKS)
    if target is not None:
        write_file("--out", target, text)
    if output == "json":
        echo_document("config.import", {
            "source": mm2_file, "out": out, "config": imported.document,
            "mapped": [{"key": k, "to": w} for k, w in imported.mapped],
            "unsupported": [{"key": k, "reason": r} for k, r in imported.unsupported],
            "env": imported.env,
        })  # fmt: skip
    elif out is None:
        click.echo(text, nl=False)
    else:
        document = imported.document
        click.echo(
            f"{out}: {len(document['clusters'])} clusters, {len(document['flows'])} flows; "
            f"{len(imported.mapped)} keys mapped, {len(imported.unsupported)} not carried over "
            "(see its comments)"
        )
        if imported.env:
            click.echo("set first: " + ", ".join(sorted(imported.env)))


COMMANDS = [config]
