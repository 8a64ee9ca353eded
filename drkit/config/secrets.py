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
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel

SECRET_WORDS = ("password", "secret", "token", "key", "credentials", "passphrase")
# librdkafka settings whose value is a string of settings that may hold a credential (a JAAS
# line's password, an OAuth extension's API key) under a name with no secret word in it.
SECRET_SETTINGS = frozenset({"sasl.jaas.config", "sasl.oauthbearer.config"})
MASK = "**********"
# Typed settings that hold a secret (each also has a ``*_file`` or ``${VAR}`` way to give it).
SECRET_FIELDS = frozenset({"password", "ssl_key_password", "client_secret", "secret"})


def is_secret_setting(name: str) -> bool:
    """Whether a client property named ``name`` may hold a secret."""
    if name.lower() in SECRET_SETTINGS:
        return True
    segments = re.split(r"[._-]+", name.lower())
    return any(segment.endswith(SECRET_WORDS) for segment in segments)


# Query parameters that carry a credential (``client_secret``, ``api_key``, ``token``...) -
# the state-store URL's rule (drkit.store.db.safe_url) and ``key``, ``auth`` and ``sig``.
_SECRET_PARAMETER = re.compile(r"pass|secret|token|key|credential|auth|sig", re.IGNORECASE)


def url_credentials(url: str) -> bool:
    """Whether ``url`` carries a credential: user info, or a query parameter named like one."""
    return mask_url(url) != url


def mask_url(url: str) -> str:
    """``url`` with its credentials masked - the whole user info, and the value of every query
    parameter named like a credential; scheme, host, port, path and other parameters kept."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{MASK}@{netloc.rpartition('@')[2]}"
    query = _masked_query(parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _masked_query(query: str) -> str:
    """A URL query with the value of every parameter named like a credential masked."""
    return "&".join(
        f"{name}={MASK}" if sep and value and _SECRET_PARAMETER.search(name) else item
        for item in query.split("&")
        for name, sep, value in [item.partition("=")]
    )


def mask_user_info(text: str) -> str:
    """``text`` - a URL, or an address such as ``user:password@host:port`` - with its
    credentials masked as :func:`mask_url` does for a URL: its user info (everything up to the
    last ``@``) and the values of query parameters named like a credential; for echoing a value
    that should hold neither (a bootstrap server: security review 12, N3)."""
    # Not left to urlsplit: it takes no scheme with a '_' (``sasl_ssl://``), nor a bare address.
    if "@" in text:
        head, _, tail = text.rpartition("@")
        scheme = head.partition("://")[0] + "://" if "://" in head else ""
        text = f"{scheme}{MASK}@{tail}"
    address, sep, query = text.partition("?")
    return f"{address}{sep}{_masked_query(query)}" if sep else text


def _mask_oauth(security: dict[str, Any] | None) -> None:
    oauth = (security or {}).get("oauth")
    if not oauth:
        return
    oauth["token_endpoint_url"] = mask_url(oauth["token_endpoint_url"])
    # Some providers take an API key or a pool secret as an extension: every value masked.
    oauth["extensions"] = dict.fromkeys(oauth.get("extensions") or {}, MASK)


def redacted_dump(config: BaseModel) -> dict[str, Any]:
    """The effective config (a :class:`~drkit.config.model.DrkitConfig`; typed as its base:
    the model imports this module's helpers) as JSON-ready data with every secret masked."""
    data = config.model_dump(mode="json")
    for cluster in data["clusters"].values():
        cluster["client_overrides"] = {
            key: MASK if is_secret_setting(key) else value
            for key, value in cluster["client_overrides"].items()
        }
        _mask_oauth(cluster.get("security"))
        for security in (cluster.get("role_security") or {}).values():
            _mask_oauth(security)
    tracing = data.get("tracing") or {}
    if tracing.get("otlp_endpoint"):
        tracing["otlp_endpoint"] = mask_url(tracing["otlp_endpoint"])
    for hook in (data.get("failover") or {}).get("hooks") or ():
        command = hook.get("command") or []
        for index in hook_argument_secrets(command):  # config validate warns of each
            command[index] = MASK
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
    by_name = overrides or path.endswith("oauth.extensions")  # free names: recognised by name
    for name, value in section.items():
        where = f"{path}.{name}"
        if isinstance(value, Mapping | list):
            found += literal_secrets(value, where)
            continue
        secret = (
            is_secret_setting(str(name)) and not str(name).endswith(("location", "file"))
            if by_name
            else name in SECRET_FIELDS
        )
        written = value is not None and value != "" and "${" not in str(value)
        if name == "url" and isinstance(value, str):
            secret = _url_password(value)  # https://user:secret@host/...
        if name in _CREDENTIAL_URLS and isinstance(value, str):
            secret = url_credentials(value)  # ...?client_secret=..., ?token=...
        if secret and written:
            found.append(where)
    return found


# URLs whose query (or user info) may carry a credential, as written in the config.
_CREDENTIAL_URLS = frozenset({"token_endpoint_url", "otlp_endpoint"})


def _url_password(url: str) -> bool:
    """Whether a URL carries a password in its user part (``scheme://user:password@host``)."""
    from urllib.parse import urlsplit

    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return False
    userinfo, at, _host = netloc.rpartition("@")
    return bool(at) and ":" in userinfo and bool(userinfo.partition(":")[2])


_SECRET_NAME = r"(?:pass(?:word|wd|phrase)?|secret|token|api[-_]?key|credentials?)"
# --token=abc, password:abc, DB_PASSWORD=abc
_SECRET_ASSIGNED = re.compile(rf"^-*[\w.-]*{_SECRET_NAME}[\w.-]*\s*[=:]\s*\S", re.IGNORECASE)
# Authorization: Bearer abc (curl -H)
_AUTH_HEADER = re.compile(r"^(?:proxy-)?authorization\s*:\s*\S", re.IGNORECASE)
# --password abc: the flag, then the value as the next argument
_SECRET_FLAG = re.compile(rf"^--?[\w.-]*{_SECRET_NAME}$", re.IGNORECASE)


def hook_argument_secrets(command: Sequence[object]) -> list[int]:
    """The indexes of a hook command's arguments that look like a secret written out:
    ``name=value`` or ``name: value`` with a credential's name, an Authorization header, the
    value after a ``--password``-like flag, a URL carrying a credential."""
    found = []
    for index, argument in enumerate(str(a) for a in command):
        if "${" in argument:
            continue  # refused at load (a hook's secrets go in its env)
        previous = str(command[index - 1]) if index else ""
        if (
            _SECRET_ASSIGNED.search(argument)
            or _AUTH_HEADER.search(argument)
            or (argument.startswith(("http://", "https://")) and url_credentials(argument))
            or (_SECRET_FLAG.match(previous) and argument and not argument.startswith("-"))
        ):
            found.append(index)
    return found


def hook_secret_warnings(document: Mapping[str, Any]) -> list[str]:
    """``drkit config validate``'s warning for each hook argument that looks like a secret
    written out (``document``: the YAML as written); none repeats a value."""
    failover = document.get("failover")
    hooks = failover.get("hooks") if isinstance(failover, Mapping) else None
    out = []
    for index, hook in enumerate(hooks if isinstance(hooks, list) else ()):
        command = hook.get("command") if isinstance(hook, Mapping) else None
        for place in hook_argument_secrets(command if isinstance(command, list) else ()):
            out.append(
                f"failover.hooks[{index}].command[{place}] looks like a secret written out: "
                "it shows in the process list while the hook runs, in config show and in the "
                "run's record - give it in the hook's env: (set for its process only, masked)"
            )
    return out


def literal_secret_warnings(document: Mapping[str, Any]) -> list[str]:
    """``drkit config validate``'s warning for each secret written out in the config file
    (``document``: its YAML as written, before ``${VAR}`` expansion); none repeats a value."""
    return [
        f"{path} is a literal secret; use ${{VAR}} or a password file (password_file, "
        "client_secret_file)"
        for key, section in document.items()
        for path in literal_secrets(section, str(key))
    ]
