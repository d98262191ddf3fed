"""Secrets kept out of what gpuplan prints and stores: the password of a URL and API keys in its query.

:func:`redact` rewrites every URL found in a text (a bare URL, or an error message quoting one):
``scheme://user:password@host`` becomes ``scheme://user:***@host`` and the value of a secret-named
query parameter (``?api_key=…``, ``token``, ``password``, … :data:`SECRET_QUERY_NAMES`) becomes ``***``.
A user name alone (``postgresql://user@host/db``) is not a secret and is kept. In an ``http``/``https``/
``ws``/``wss`` URL (an endpoint) the credentials are RFC 3986's: they end at the last ``@`` before the
first ``/``, ``?`` or ``#`` (what ``urllib.parse.urlsplit`` and the load client read), so an ``@`` in a
path (``http://h:80/v1/a@b``) is left alone and the URL stays usable (``--resume`` reads it back). In any
other scheme (a store URL) the password ends at the URL's last ``@``, so one holding an unencoded ``@``,
``/`` or ``?`` is still hidden whole: there more is hidden, never less. :func:`redact_json` applies it
to every string of a JSON document (a stored run config).

HTTP headers: :func:`is_secret_header` tells a credential-carrying header by its name
(``Authorization``, ``X-API-Key``, ``Cookie``, any name holding ``key``, ``token``, ``secret``,
``auth`` or ``password``), :func:`redact_headers` masks their values and :func:`mask_secrets`
replaces given secret strings (an API key) wherever a text holds them (an error body echoing it).
"""

from __future__ import annotations

import re
from typing import Any

MASK = "***"
SECRET_QUERY_NAMES = frozenset(
    {
        "api_key",
        "api-key",
        "apikey",
        "key",
        "token",
        "access_token",
        "auth",
        "password",
        "passwd",
        "pwd",
        "secret",
        "client_secret",
        "sig",
        "signature",
    }
)
"""Query parameters whose value is a credential (lower-case; matched case-insensitively)."""

SECRET_HEADER_PARTS = ("auth", "key", "token", "secret", "password", "cookie", "session", "signature")
"""A header whose lower-case name contains one of these carries a credential (``Authorization``,
``Proxy-Authorization``, ``X-API-Key``, ``api-key`` (Azure OpenAI), ``Cookie``, ``X-Auth-Token``)."""

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>`]*)")
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s]*)")


def _masked_query(query: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m["name"].lower() not in SECRET_QUERY_NAMES or not m["value"]:
            return m[0]
        return f"{m['lead']}{m['name']}={MASK}"

    return _QUERY_PARAM.sub(one, query)


ENDPOINT_SCHEMES = frozenset({"http://", "https://", "ws://", "wss://"})
"""Schemes whose authority ends at the first ``/``, ``?`` or ``#`` (RFC 3986 section 3.2)."""
_AUTHORITY_END = re.compile(r"[/?#]")


def _credentials_end(scheme: str, rest: str) -> int:
    """Index of the ``@`` that ends the credentials in ``rest`` (after the scheme), -1 when none."""
    if scheme.lower() in ENDPOINT_SCHEMES:
        end = _AUTHORITY_END.search(rest)
        return rest.rfind("@", 0, end.start() if end else len(rest))
    return rest.rfind("@")


def _masked_url(m: re.Match[str]) -> str:
    rest = m["rest"]
    at = _credentials_end(m["scheme"], rest)
    colon = rest.find(":", 0, max(at, 0))
    if at >= 0 and colon >= 0 and not any(c in rest[:colon] for c in "/?#"):
        rest = f"{rest[:colon]}:{MASK}{rest[at:]}"
    return m["scheme"] + _masked_query(rest)


def redact(text: str) -> str:
    """``text`` with the password of every URL in it and every secret query value replaced by ``***``."""
    if "://" not in text:
        return text
    return _URL.sub(_masked_url, text)


def redact_json(value: Any) -> Any:
    """A copy of a JSON value (dicts, lists, strings, numbers) with :func:`redact` applied to every
    string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redact_json(k): redact_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_json(v) for v in value]
    return value


def is_secret_header(name: str) -> bool:
    """Whether the header ``name`` carries a credential (:data:`SECRET_HEADER_PARTS`)."""
    lowered = name.lower()
    return any(part in lowered for part in SECRET_HEADER_PARTS)


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """A copy of ``headers`` with the value of every credential-carrying header replaced by ``***``."""
    return {name: MASK if is_secret_header(name) else redact(value) for name, value in headers.items()}


def mask_secrets(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every occurrence of each non-empty secret replaced by ``***`` (and URLs redacted)."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return redact(text)
