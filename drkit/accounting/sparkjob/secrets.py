"""Secrets a written spec names instead of holding.

``drkit verify --write-spec`` puts ``${DRKIT_<SIDE>_<WHAT>}`` placeholders in the Kafka options
where a password, an OAuth client secret or a private key would go, and lists them in the
spec's ``secret_env`` (name -> what it is).  The job fills them from its driver's environment
when it starts (:func:`fill_secrets`), so no secret sits in a file on shared storage; Spark then
carries the filled options to its executors as it does any reader option.

Pure Python: this runs inside the job (shipped with ``--py-files``), without drkit installed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from drkit.accounting.sparkjob.schema import Spec

PLACEHOLDER = re.compile(r"\$\{(DRKIT_[A-Z0-9_]+)\}")
JAAS_OPTION = "kafka.sasl.jaas.config"  # a secret inside it sits in a JAAS quoted string


class MissingSecret(Exception):
    """The spec names a secret its job's environment does not hold."""


def placeholder(name: str) -> str:
    return "${" + name + "}"


def jaas_escaped(value: str) -> str:
    """``value`` as the inside of a JAAS double-quoted string."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


def fill_secrets(spec: Spec, environ: Mapping[str, str]) -> Spec:
    """``spec`` with every placeholder in its Kafka options replaced from ``environ``.

    Raises MissingSecret naming every variable that is not set (and what each one is).
    A spec without ``secret_env`` (written before secrets were referenced, or for clusters
    without any) comes back unchanged.
    """
    named = spec.get("secret_env") or {}
    missing = [name for name in named if not environ.get(name)]
    if missing:
        listed = "; ".join(f"{name} ({named[name]})" for name in missing)
        raise MissingSecret(
            f"the spec reads {len(missing)} secret(s) from the job's environment, not set: {listed}"
        )

    def filled(options: dict[str, str]) -> dict[str, str]:
        return {key: _fill(key, value, environ) for key, value in options.items()}

    return {
        **spec,
        "source_options": filled(spec["source_options"]),
        "target_options": filled(spec["target_options"]),
    }


def _fill(option: str, value: str, environ: Mapping[str, str]) -> str:
    def secret(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise MissingSecret(f"option {option} needs {name} in the job's environment")
        return jaas_escaped(environ[name]) if option == JAAS_OPTION else environ[name]

    return PLACEHOLDER.sub(secret, value)
