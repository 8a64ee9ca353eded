"""Which config file a command uses, and where drkit keeps its state.

Order for the config file: ``--config`` > ``$DRKIT_CONFIG`` > ``./drkit.yaml`` > the file
``drkit local up`` wrote into the state directory.  The state directory is ``--state-dir`` >
``$DRKIT_STATE_DIR`` > ``$XDG_STATE_HOME/drkit`` > ``~/.local/state/drkit``.
"""

from __future__ import annotations

import os
from pathlib import Path

from drkit.errors import ConfigError, Problem

LOCAL_CONFIG_NAME = "drkit.yaml"


def state_dir(explicit: str | Path | None = None) -> Path:
    """The state directory (not created here)."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    if env := os.environ.get("DRKIT_STATE_DIR"):
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "drkit"


def cache_dir() -> Path:
    """Where downloaded jars are cached: ``$DRKIT_CACHE_DIR`` or ``$XDG_CACHE_HOME/drkit``."""
    if env := os.environ.get("DRKIT_CACHE_DIR"):
        return Path(env).expanduser().resolve()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "drkit"


def default_config_path(state: Path | None = None) -> Path:
    """Where ``drkit local up`` writes the ready-made config for the local clusters."""
    return (state or state_dir()) / LOCAL_CONFIG_NAME


def resolve_config_path(explicit: str | Path | None = None, state: Path | None = None) -> Path:
    """The config file a command should use; raises ConfigError when there is none."""
    if explicit:
        return Path(explicit)
    if env := os.environ.get("DRKIT_CONFIG"):
        return Path(env)
    cwd_file = Path.cwd() / LOCAL_CONFIG_NAME
    if cwd_file.is_file():
        return cwd_file
    local = default_config_path(state)
    if local.is_file():
        return local
    raise ConfigError(
        [
            Problem(
                "",
                "no config file: pass --config, set DRKIT_CONFIG, create ./drkit.yaml "
                "or run 'drkit local up' to get one for local clusters",
            )
        ]
    )
