"""Which settings are secrets, and the config as it may be shown to an operator.

Typed secrets (passwords, the state-store URL) are :class:`pydantic.SecretStr` and mask
themselves.  ``client_overrides`` are free-form librdkafka properties, so their secrets are
recognised by name: any dotted/underscored segment that is, or ends in, one of
:data:`SECRET_WORDS` (``sasl.oauthbearer.client.secret``, ``ssl.key.password``,
``ssl.key.pem``, ``sasl.oauthbearer.token``...).  Over-masking a harmless key (a key file's
path) is the accepted price of never showing a secret.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from drkit.config.model import DrkitConfig

SECRET_WORDS = ("password", "secret", "token", "key", "credentials", "passphrase")
MASK = "**********"
# Typed settings that hold a secret (each also has a ``*_file`` or ``${VAR}`` way to give it).
SECRET_FIELDS = frozenset({"password", "ssl_key_password", "client_secret", "secret"})


def is_secret_setting(name: str) -> bool:
    """Whether a client property named ``name`` may hold a secret."""
    segments = re.split(r"[._-]+", name.lower())
    return any(segment.endswith(SECRET_WORDS) for segment in segments)


def redacted_dump(config: DrkitConfig) -> dict[str, Any]:
    """The effective config as JSON-ready data with every secret masked."""
    data = config.model_dump(mode="json")
    for cluster in data["clusters"].values():
        cluster["client_overrides"] = {
            key: MASK if is_secret_setting(key) else value
            for key, value in cluster["client_overrides"].items()
        }
    return data


def literal_secrets(section: object, path: str) -> list[str]:
    """The dotted paths under ``section`` - settings as written in YAML, before ``${VAR}``
    expansion - whose value is a secret written out: not a ``${VAR}`` reference, not a
    ``*_file``.  In ``client_overrides`` a secret is recognised by name, paths excepted
    (``ssl.key.location``)."""
    found: list[str] = []
    if isinstance(section, list):
        for index, item in enumerate(section):
            found += literal_secrets(item, f"{path}[{index}]")
        return found
    if not isinstance(section, Mapping):
        return found
    overrides = path.endswith("client_overrides")
    for name, value in section.items():
        where = f"{path}.{name}"
        if isinstance(value, Mapping | list):
            found += literal_secrets(value, where)
            continue
        secret = (
            is_secret_setting(str(name)) and not str(name).endswith(("location", "file"))
            if overrides
            else name in SECRET_FIELDS
        )
        written = value is not None and value != "" and "${" not in str(value)
        if name == "url" and isinstance(value, str):
            secret = _url_password(value)  # https://user:secret@host/...
        if secret and written:
            found.append(where)
    return found


def _url_password(url: str) -> bool:
    """Whether a URL carries a password in its user part (``scheme://user:password@host``)."""
    from urllib.parse import urlsplit

    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return False
    userinfo, at, _host = netloc.rpartition("@")
    return bool(at) and ":" in userinfo and bool(userinfo.partition(":")[2])


def literal_secret_warnings(document: Mapping[str, Any]) -> list[str]:
    """``drkit config validate``'s warning for each secret written out in the config file
    (``document``: its YAML as written, before ``${VAR}`` expansion); none repeats a value."""
    return [
        f"{path} is a literal secret; use ${{VAR}} or a password file (password_file, "
        "client_secret_file)"
        for key, section in document.items()
        for path in literal_secrets(section, str(key))
    ]
