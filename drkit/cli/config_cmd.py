"""``drkit config``: validate and show configuration files."""

from __future__ import annotations

import click

from drkit.cli.context import (
    AppContext,
    config_option,
    echo_document,
    echo_json,
    output_option,
    pass_app,
)
from drkit.config import load_config
from drkit.config.secrets import redacted_dump
from drkit.errors import ConfigError


@click.group("config")
def config() -> None:
    """Check and inspect drkit configuration."""


@config.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@output_option
def validate(file: str, output: str) -> None:
    """Validate FILE: exit 0 when good, else one line per problem (key path: reason)."""
    from drkit.drills.schedule import schedule_problems

    loaded = load_config(file)
    if problems := schedule_problems(loaded):
        raise ConfigError(problems, source=file)
    if output == "json":
        summary = {"file": file, "ok": True, "clusters": sorted(loaded.clusters),
                   "flows": [f.name for f in loaded.flows]}  # fmt: skip
        echo_document("config.validate", summary)
        return
    click.echo(f"{file}: ok ({len(loaded.clusters)} clusters, {len(loaded.flows)} flows)")


@config.command("show")
@config_option
@pass_app
def show(app: AppContext, config_file: str | None) -> None:
    """Print the effective config as JSON, with defaults filled in and secrets masked
    (passwords, the state-store URL, and client_overrides whose names look secret)."""
    loaded = app.config(config_file)
    click.echo(f"# {app.config_path}", err=True)
    echo_json(redacted_dump(loaded))


COMMANDS = [config]
