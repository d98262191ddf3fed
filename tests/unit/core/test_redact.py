"""URL passwords and API keys masked in any text: one helper, every shape it meets."""

from __future__ import annotations

import pytest

from gpuplan.core.redact import MASK, is_secret_header, mask_secrets, redact, redact_headers, redact_json


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("http://user:pw@127.0.0.1:8000/v1", "http://user:***@127.0.0.1:8000/v1"),
        ("postgresql+psycopg://me:s3cret@db:5432/r?sslmode=require", "postgresql+psycopg://me:***@db:5432/r?sslmode=require"),
        ("postgresql://u:p@ss@db/x", "postgresql://u:***@db/x"),  # an unencoded @ in the password
        ("postgresql://u:a/b?c@db/x", "postgresql://u:***@db/x"),  # unencoded / and ? (SQLAlchemy takes them)
        ("http://:pw@h", "http://:***@h"),
        ("http://h/v1?api_key=abc&max_tokens=5&Token=x", "http://h/v1?api_key=***&max_tokens=5&Token=***"),
        ("store 'mysql://root:hunter2@h/db': refused", "store 'mysql://root:***@h/db': refused"),
        ("x http://a:b@c and https://d:e@f end", "x http://a:***@c and https://d:***@f end"),
        ("http://u:p@ss@h:80/v1", "http://u:***@h:80/v1"),  # urlsplit's userinfo: up to the authority's last @
        ("mysql://h:80/a@b", "mysql://h:***@b"),  # a store URL, ambiguous: more is hidden, never less
    ],
)  # fmt: skip
def test_secrets_are_masked(text: str, shown: str) -> None:
    assert redact(text) == shown
    assert redact(shown) == shown  # masking twice changes nothing


@pytest.mark.parametrize(
    "text",
    [
        "postgresql://user@host/db",  # a user name alone is not a secret
        "http://127.0.0.1:8000/v1/completions",
        "sqlite:////tmp/a@b.sqlite",
        "sqlite:///results.sqlite",
        "no url: user:pw@host",
        "http://h/v1?key=",
        "http://h:80/v1/a@b",  # an @ in an endpoint's path is not a credential: the URL stays usable
        "https://h/x?q=a:b@c",
    ],
)
def test_text_without_a_secret_is_unchanged(text: str) -> None:
    assert redact(text) == text


def test_redact_json_masks_every_string_and_keeps_the_rest() -> None:
    doc = {
        "url": "http://u:pw@h:1",
        "n": 3,
        "ok": True,
        "nested": [{"target": "https://k:v@h/x?token=t"}, None, 1.5],
        "http://a:b@c": "key",
    }
    assert redact_json(doc) == {
        "url": f"http://u:{MASK}@h:1",
        "n": 3,
        "ok": True,
        "nested": [{"target": f"https://k:{MASK}@h/x?token={MASK}"}, None, 1.5],
        f"http://a:{MASK}@c": "key",
    }
    assert doc["url"] == "http://u:pw@h:1"  # a copy: the input is not changed


@pytest.mark.parametrize("url", ["http://u:p@ss@h:80/v1/a@b?x=1", "https://k:v@h#f@g", "http://h:80/a:b@c"])
def test_an_endpoint_keeps_the_host_urlsplit_reads(url: str) -> None:
    """What the load client connects to (``urlsplit``'s host and port) survives masking."""
    from urllib.parse import urlsplit

    before, after = urlsplit(url), urlsplit(redact(url))
    assert (after.hostname, after.port, after.path) == (before.hostname, before.port, before.path)
    assert before.password is None or before.password not in redact(url).split("@")[0]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("Authorization", True),
        ("proxy-authorization", True),
        ("X-API-Key", True),
        ("api-key", True),  # Azure OpenAI's header
        ("Cookie", True),
        ("X-Auth-Token", True),
        ("X-Request-Source", False),
        ("Content-Type", False),
        ("OpenAI-Organization", False),
    ],
)
def test_secret_headers_are_told_by_their_name(name: str, secret: bool) -> None:
    assert is_secret_header(name) is secret


def test_redact_headers_masks_only_the_secret_values() -> None:
    headers = {"Authorization": "Bearer sk-1", "X-Source": "bench", "X-Callback": "http://u:pw@h/"}
    assert redact_headers(headers) == {
        "Authorization": MASK,
        "X-Source": "bench",
        "X-Callback": f"http://u:{MASK}@h/",
    }
    assert headers["Authorization"] == "Bearer sk-1"  # a copy


def test_mask_secrets_replaces_every_occurrence_and_ignores_empty_ones() -> None:
    text = "401: key sk-1 refused (sk-1), see http://u:pw@h"
    assert mask_secrets(text, ("sk-1", "")) == f"401: key {MASK} refused ({MASK}), see http://u:{MASK}@h"
    assert mask_secrets("nothing", ()) == "nothing"
