"""One schema registry over HTTP - the only place drkit talks to a registry.

Reads go through the Confluent-compatible REST API (subjects, versions, ids), which Confluent
Schema Registry, Apicurio Registry and Karapace all serve.  Writing schemas *with their ids* is
not part of that API's common ground, so it is per kind: for Apicurio Registry 2.x drkit moves
the source's export archive into the target's import endpoint (ids kept; an id the target
already holds is left as it is - which is why drkit.schemas.sync checks for conflicts first and
verifies every id after).

The registry's mode (``READWRITE``/``READONLY``, Confluent's ``/mode``) is set where the
registry supports it; Apicurio 2.x answers "Operation not supported", which
:meth:`SchemaRegistry.set_mode` reports instead of failing.

Every failure is a SchemaRegistryError naming the registry, the request and the cause; the
password is never part of one.
"""

from __future__ import annotations

import base64
import io
import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from tenacity import (
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from drkit.config.model import SchemaRegistryConfig
from drkit.errors import SchemaRegistryError
from drkit.schemas.catalogue import SchemaReference, SchemaVersion

_JSON = "application/vnd.schemaregistry.v1+json"


class _Unavailable(Exception):
    """A connection failure or a 5xx answer: worth one more try."""


class SchemaRegistry:
    """The registry of cluster ``alias``."""

    def __init__(self, alias: str, config: SchemaRegistryConfig, attempts: int = 3) -> None:
        self.alias = alias
        self.config = config
        self.attempts = attempts  # tries per request on connection failures and 5xx answers

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.alias!r}, {self.config.url!r})"

    # -- reading ----------------------------------------------------------------------------

    def catalogue(self) -> tuple[SchemaVersion, ...]:
        """Every version of every subject (soft-deleted ones are not listed)."""
        versions: list[SchemaVersion] = []
        try:
            for subject in _strings(self._get_json("/subjects")):
                quoted = urllib.parse.quote(subject, safe="")
                for number in self._get_json(f"/subjects/{quoted}/versions"):
                    raw = self._get_json(f"/subjects/{quoted}/versions/{int(number)}")
                    versions.append(_version(subject, raw))
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise SchemaRegistryError(
                f"schema registry of {self.alias} at {self.config.url} answered something that "
                f"is not the Confluent-compatible API ({type(err).__name__}: {err}); is the url "
                "its root?"
            ) from None
        return tuple(versions)

    def answers(self) -> bool:
        """Whether the registry answers at all (one try, the configured timeout)."""
        try:
            self._request("GET", self.config.url + "/subjects", None, {})
        except (SchemaRegistryError, _Unavailable):
            return False
        return True

    # -- writing ----------------------------------------------------------------------------

    def export_archive(self) -> bytes:
        """Everything the registry holds, as its export archive (Apicurio: a zip)."""
        return self._request("GET", self.config.registry_api + "/admin/export", None, {})

    def import_archive(self, archive: bytes) -> None:
        """Add an export archive's contents, ids kept; ids already held are not replaced."""
        self._request(
            "POST",
            self.config.registry_api + "/admin/import",
            archive,
            {"Content-Type": "application/zip"},
        )

    def mode(self) -> str | None:
        """The registry-wide mode (``READWRITE``, ``READONLY``, ...), or None when the registry
        has no modes (Apicurio 2.x)."""
        try:
            answer = self._request("GET", self.config.url + "/mode", None, {"Accept": _JSON})
        except _Unsupported:
            return None
        found = json.loads(answer or b"{}").get("mode")
        return str(found) if found is not None else None

    def set_mode(self, mode: str) -> str:
        """Set the registry-wide mode (``READWRITE``/``READONLY``); returns the mode now in
        force, or ``unsupported: <the registry's words>`` when the registry has no modes."""
        body = json.dumps({"mode": mode}).encode()
        try:
            answer = self._request("PUT", self.config.url + "/mode", body, {"Content-Type": _JSON})
        except _Unsupported as err:
            return f"unsupported: {err}"
        return str(json.loads(answer or b"{}").get("mode", mode))

    # -- HTTP -------------------------------------------------------------------------------

    def _get_json(self, path: str) -> Any:
        answer = self._request("GET", self.config.url + path, None, {"Accept": _JSON})
        try:
            return json.loads(answer)
        except ValueError:
            raise SchemaRegistryError(
                f"schema registry of {self.alias} at {self.config.url}: GET {path} did not "
                "answer JSON"
            ) from None

    def _request(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        retrying = Retrying(
            retry=retry_if_exception_type(_Unavailable),
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential(multiplier=0.2, max=2),
            reraise=True,
        )
        try:
            return retrying(self._once, method, url, body, headers)
        except _Unavailable as err:
            raise SchemaRegistryError(
                f"schema registry of {self.alias} at {self.config.url} is unreachable "
                f"({method} {_path(url)}: {err})"
            ) from None

    def _once(self, method: str, url: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        if self.config.username is not None and self.config.password is not None:
            token = f"{self.config.username}:{self.config.password.get_secret_value()}"
            request.add_header(
                "Authorization", "Basic " + base64.b64encode(token.encode()).decode()
            )
        try:
            with _OPENER.open(request, timeout=self.config.timeout_s) as response:
                return bytes(response.read())
        except urllib.error.HTTPError as err:
            detail = _error_message(err)
            if "not supported" in detail.lower():  # Apicurio 2.x: 404 on /mode
                raise _Unsupported(detail) from None
            if err.code >= 500:
                raise _Unavailable(f"HTTP {err.code}: {detail}") from None
            raise SchemaRegistryError(
                f"schema registry of {self.alias} at {self.config.url} refused "
                f"{method} {_path(url)}: HTTP {err.code} {detail}"
            ) from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise _Unavailable(str(reason)) from None


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the same scheme, host and port: urllib copies every header
    to the new address - the registry's Basic credentials included - whatever host it names."""

    def redirect_request(  # type: ignore[no-untyped-def]
        self, req, fp, code, msg, headers, newurl
    ):  # fmt: skip
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            raise urllib.error.HTTPError(
                req.full_url, code,
                f"redirected to another origin ({new.scheme}://{new.netloc}): not followed, "
                "the registry's credentials would go along", headers, io.BytesIO(b""),
            )  # fmt: skip
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_SameOriginRedirects())


class _Unsupported(Exception):
    """The registry has no such operation (Apicurio 2.x and ``/mode``)."""


def _strings(raw: Any) -> list[str]:
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise TypeError(f"expected a list of subject names, got {str(raw)[:80]}")
    return raw


def _version(subject: str, raw: dict[str, Any]) -> SchemaVersion:
    references = tuple(
        SchemaReference(str(ref["name"]), str(ref["subject"]), int(ref["version"]))
        for ref in raw.get("references") or ()
    )
    return SchemaVersion(
        subject=subject,
        version=int(raw["version"]),
        id=int(raw["id"]),
        schema_type=str(raw.get("schemaType") or "AVRO"),
        schema=str(raw["schema"]),
        references=references,
    )


def _error_message(err: urllib.error.HTTPError) -> str:
    try:
        raw = json.loads(err.read() or b"{}")
    except ValueError:
        return err.reason if isinstance(err.reason, str) else str(err.code)
    return str(raw.get("message") or err.reason)


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path
