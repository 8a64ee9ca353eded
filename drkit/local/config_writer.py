"""Write the ready-to-use drkit config for the local clusters."""

from __future__ import annotations

import os
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined

from drkit.config.discovery import default_config_path
from drkit.config.loader import load_config
from drkit.errors import ConfigError, Problem
from drkit.local.cluster import ClusterStatus
from drkit.local.secure import client_security, role_principals, super_users
from drkit.local.tls import LocalSecrets, node_name
from drkit.store.db import DB_FILE_NAME


def require_config_writable(state_dir: Path) -> None:
    """Raise ConfigError (exit 2) when :func:`write_local_config` could not write the config
    at its path - a directory there, a parent that is a file or not writable.  Checked before
    any broker starts: a write that failed after them left them running (issue 45)."""
    path = default_config_path(state_dir)
    reason = None
    if path.is_dir() or path.with_suffix(".tmp").is_dir():
        reason = "is a directory, not a file"
    else:
        existing = path.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            reason = f"cannot be created: {existing} is not a directory"
        elif not os.access(existing, os.W_OK | os.X_OK):
            reason = f"cannot be written: {existing} is not writable"
    if reason is not None:
        why = f"the local config {reason} (--state-dir elsewhere?); nothing was started"
        raise ConfigError([Problem("", why)], source=str(path))


def write_local_config(
    state_dir: Path,
    clusters: list[ClusterStatus],
    secrets: LocalSecrets | None = None,
    registries: dict[str, str] | None = None,
) -> Path:
    """Render config for ``clusters`` and validate it; returns its path.  The first cluster
    replicates to each of the others (dc1 -> dc2, dc1 -> dc3, ...: one flow per standby); a
    single cluster gets no flow.

    ``registries``: a schema registry's URL per cluster (``drkit local up --schema-registry``);
    a flow syncs schemas when both of its clusters have one.

    A secured cluster gets a ``security`` section for drkit's principal and a
    ``role_security`` one per role principal (each process connects as its role): passwords -
    or client certificates and keys - and the CA by file (``secrets``), so the config itself
    holds no secret."""
    env = Environment(
        loader=PackageLoader("drkit", "templates"), undefined=StrictUndefined, autoescape=False
    )
    names = [c.name for c in clusters]
    text = env.get_template("local-config.yaml.j2").render(
        clusters={c.name: c.bootstrap_servers for c in clusters},
        security={
            c.name: client_security(secrets, "drkit", c.client_auth)
            for c in clusters
            if c.secure and secrets is not None
        },
        principals=role_principals(),
        super_users={
            c.name: super_users(node_name(c.name), c.client_auth)
            for c in clusters
            if c.secure and secrets is not None
        },
        role_security={
            c.name: {
                role: client_security(secrets, principal.split(":", 1)[1], c.client_auth)
                for role, principal in role_principals().items()
            }
            for c in clusters
            if c.secure and secrets is not None
        },
        registries=registries or {},
        source=names[0],
        targets=names[1:],
        db_path=state_dir / DB_FILE_NAME,
    )
    path = default_config_path(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    load_config(tmp)  # never leave an invalid generated config behind
    tmp.replace(path)
    return path
