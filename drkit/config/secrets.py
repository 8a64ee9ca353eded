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
from typing import Any

from drkit.config.model import DrkitConfig

SECRET_WORDS = ("password", "secret", "token", "key", "credentials", "passphrase")
MASK = "**********"


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
