"""Secrets kept out of what gpuplan prints and stores: the password of a URL and API keys in its query.

:func:`redact` rewrites every URL found in a text (a bare URL, or an error message quoting one):
``scheme://user:password@host`` becomes ``scheme://user:***@host`` and the value of a secret-named
query parameter (``?api_key=…``, ``token``, ``password``, … :data:`SECRET_QUERY_NAMES`) becomes ``***``.
A user name alone (``postgresql://user@host/db``) is not a secret and is kept. The password ends at the
URL's last ``@``, so one holding an unencoded ``@``, ``/`` or ``?`` (SQLAlchemy accepts them) is still
hidden whole; the price is that an ``@`` later in a URL with a port (``http://h:80/a@b``) hides its
host and port too: more is hidden, never less. :func:`redact_json` applies it to every string of a
JSON document (a stored run config).
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

_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<rest>[^\s'\"<>`]*)")
_QUERY_PARAM = re.compile(r"(?P<lead>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s]*)")


def _masked_query(query: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m["name"].lower() not in SECRET_QUERY_NAMES or not m["value"]:
            return m[0]
        return f"{m['lead']}{m['name']}={MASK}"

    return _QUERY_PARAM.sub(one, query)


def _masked_url(m: re.Match[str]) -> str:
    rest = m["rest"]
    at = rest.rfind("@")
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
