#!/usr/bin/env python3
"""Regenerate (or check) every output block of the playbooks in docs/playbooks/.

A page marks a command block with an HTML comment followed by a fenced ``text`` block:

    <!-- run:
    gpuplan fit --model Qwen/Qwen-7B-Chat --gpu T4
    gpuplan train-plan ... --format json | pick gpu=.plans[].gpu hours=.plans[].cost.wall_hours
    -->
    ```text
    (rewritten by this script)
    ```

Each line of the comment is one command (a trailing backslash continues it). ``gpuplan`` runs as
``python -m gpuplan`` from the repository root with ``PYTHONPATH=src``, ``COLUMNS=160`` and an empty
config dir, so only the bundled catalog and the page's ``--catalog`` files count. Stages after
``|`` are done here, not by a shell:

* ``pick NAME=PATH ...``: JSON selection. PATH is ``.a.b[0].c``; ``[]`` iterates over one list and
  gives one output line per element (every PATH with ``[]`` must share the same list). Floats are
  rounded (4 significant digits, integers from 100 up) so the docs do not churn on the last bit.
* ``where PATH=VALUE``: keep only the list elements (of the ``[]`` list) whose PATH (relative to the
  element) equals VALUE; put it before ``pick``.
* ``grep REGEX`` / ``drop REGEX``: keep / remove matching lines. ``head N`` / ``tail N``.

``<!-- background: gpuplan mock-server ... -->`` starts a process for the rest of the page (stopped
when the page is done); its block shows the command. ``<!-- wait-http: URL -->`` waits for it.

In commands and URLs, ``$TMP`` is the page's scratch directory (the same for every command of the
page, so one command can write a file that a later one reads) and ``$PORT`` a free loopback port
picked for the page; both are substituted when the command runs and shown as written. A base command
ending in ``2>/dev/null`` has its stderr left out of the block (for lines such as a run id that
differ on every run).

The output block shows ``$ command`` and what it printed (stdout, then stderr, then ``[exit N]``
when non-zero). ``--check`` rewrites nothing and exits 1 with a unified diff when a page drifted.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import difflib
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "playbooks"
TIMEOUT_S = 120
PRICE_DATE = "2026-12-03"
"""The date quotes are aged against in the playbooks (their stale flags), so a page does not drift by itself."""
QUIET = " 2>/dev/null"
BLOCK = re.compile(
    r"<!-- (?P<kind>run|background|wait-http):(?P<body>.*?)-->\n(?P<fence>```text\n(?:.*?\n)??```\n)?",
    re.DOTALL,
)


class PlaybookError(Exception):
    """A page cannot be regenerated (bad marker, failed stage, process that would not start)."""


@dataclass
class Env:
    """Process environment shared by every command: fixed width, empty config dir, temp store."""

    tmp: Path
    vars: dict[str, str] = field(default_factory=dict)
    port: int = 0

    @classmethod
    def make(cls, tmp: Path) -> Env:
        (tmp / "config").mkdir(exist_ok=True)
        (tmp / "home").mkdir(exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPLAN_")}
        src = str(ROOT / "src")
        env.update(
            PYTHONPATH=src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""),
            COLUMNS="160",
            LINES="200",
            TERM="dumb",
            NO_COLOR="1",
            PYTHONHASHSEED="0",
            TZ="UTC",
            HOME=str(tmp / "home"),
            GPUPLAN_CONFIG_DIR=str(tmp / "config"),
            GPUPLAN_STORE=str(tmp / "results.sqlite"),
            GPUPLAN_PRICE_DATE=PRICE_DATE,
        )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        return cls(tmp=tmp, vars=env, port=port)

    def expand(self, text: str) -> str:
        """``$TMP`` and ``$PORT`` replaced by this page's scratch directory and port."""
        return text.replace("$TMP", shlex.quote(str(self.tmp))).replace("$PORT", str(self.port))


def commands(body: str) -> list[str]:
    """The commands of a marker: one per line, backslash continues, blank lines skipped."""
    out: list[str] = []
    pending = ""
    for raw in body.strip().splitlines():
        line = raw.strip()
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            out.append(line)
    if pending.strip():
        out.append(pending.strip())
    return out


def argv_of(cmd: str, env: Env) -> list[str]:
    args = shlex.split(env.expand(cmd))
    if not args or args[0] != "gpuplan":
        raise PlaybookError(f"commands must start with 'gpuplan': {cmd!r}")
    return [sys.executable, "-m", "gpuplan", *args[1:]]


def split_stages(cmd: str) -> tuple[str, list[list[str]]]:
    parts = [p.strip() for p in cmd.split(" | ")]
    return parts[0], [shlex.split(p) for p in parts[1:]]


def _round(v: Any) -> Any:
    if isinstance(v, float):
        if v != v or v in (float("inf"), float("-inf")):
            return str(v)
        if abs(v) >= 100:
            return round(v)
        return float(f"{v:.4g}")
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_round(x) for x in v]
    return v


_TOKEN = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d*)\]")


def _parse_path(path: str) -> list[str | int | None]:
    """``.a.b[0][]`` → ['a', 'b', 0, None]; None is the iteration point."""
    if not path.startswith((".", "[")):
        path = "." + path
    steps: list[str | int | None] = []
    pos = 0
    for m in _TOKEN.finditer(path):
        if m.start() != pos:
            raise PlaybookError(f"bad path {path!r}")
        pos = m.end()
        if m.group(1) is not None:
            steps.append(m.group(1))
        else:
            steps.append(int(m.group(2)) if m.group(2) else None)
    if pos != len(path):
        raise PlaybookError(f"bad path {path!r}")
    return steps


def _get(doc: Any, steps: list[str | int | None]) -> Any:
    cur = doc
    for s in steps:
        if cur is None:
            return None
        if isinstance(s, int):
            cur = cur[s] if isinstance(cur, list) and -len(cur) <= s < len(cur) else None
        elif isinstance(s, str):
            cur = cur.get(s) if isinstance(cur, dict) else None
    return cur


def _split_iter(path: str) -> tuple[list[str | int | None], list[str | int | None] | None]:
    steps = _parse_path(path)
    if None in steps:
        i = steps.index(None)
        if None in steps[i + 1 :]:
            raise PlaybookError(f"only one [] per path: {path!r}")
        return steps[:i], steps[i + 1 :]
    return steps, None


def stage_pick(doc: Any, args: list[str], where: list[tuple[list[str | int | None], str]]) -> list[str]:
    fields: list[tuple[str, list[str | int | None], list[str | int | None] | None]] = []
    prefix: list[str | int | None] | None = None
    for a in args:
        name, sep, path = a.partition("=")
        if not sep:
            name, path = a.lstrip(".").replace("[]", "").split(".")[-1], a
        head, rest = _split_iter(path)
        if rest is not None:
            if prefix is not None and head != prefix:
                raise PlaybookError("every [] path in one pick must iterate over the same list")
            prefix = head
        fields.append((name, head, rest))
    if prefix is None:
        return [json.dumps({n: _round(_get(doc, h)) for n, h, _ in fields}, ensure_ascii=False)]
    items = _get(doc, prefix) or []
    lines = []
    for item in items:
        if any(str(_get(item, p)) != v for p, v in where):
            continue
        row = {n: _round(_get(item, r) if r is not None else _get(doc, h)) for n, h, r in fields}
        lines.append(json.dumps(row, ensure_ascii=False))
    return lines


def apply_stages(text: str, stages: list[list[str]]) -> str:
    lines = text.splitlines()
    where: list[tuple[list[str | int | None], str]] = []
    for st in stages:
        op, args = st[0], st[1:]
        if op == "where":
            for a in args:
                p, _, v = a.partition("=")
                where.append((_parse_path(p), v))
        elif op == "pick":
            try:
                doc = json.loads("\n".join(lines))
            except json.JSONDecodeError as e:
                raise PlaybookError(f"pick needs JSON output ({e}): {text[:200]!r}") from e
            lines = stage_pick(doc, args, where)
        elif op == "grep":
            rx = re.compile(" ".join(args))
            lines = [ln for ln in lines if rx.search(ln)]
        elif op == "drop":
            rx = re.compile(" ".join(args))
            lines = [ln for ln in lines if not rx.search(ln)]
        elif op == "head":
            lines = lines[: int(args[0])]
        elif op == "tail":
            lines = lines[-int(args[0]) :]
        else:
            raise PlaybookError(f"unknown stage {op!r}")
    return "\n".join(lines)


WORKER = r"""
import contextlib, io, json, sys
from gpuplan.interfaces.cli import app
for line in sys.stdin:
    argv = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            app(args=argv, prog_name="gpuplan", standalone_mode=True)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:  # noqa: BLE001 - reported like an uncaught error
            print(f"{type(e).__name__}: {e}", file=sys.stderr)
            code = 1
    sys.stdout.write(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}) + "\n")
    sys.stdout.flush()
"""


class Worker:
    """One warm interpreter that runs gpuplan commands in-process (saves ~1 s of imports each)."""

    def __init__(self, env: Env) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER],
            cwd=ROOT,
            env=env.vars,
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )

    def run(self, args: list[str]) -> tuple[int, str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(args) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise PlaybookError(f"worker died running gpuplan {' '.join(args)}")
        r = json.loads(line)
        return int(r["code"]), r["out"], r["err"]

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_one(cmd: str, env: Env, worker: Worker | None = None) -> str:
    base, stages = split_stages(cmd)
    quiet = base.endswith(QUIET)
    if quiet:
        base = base[: -len(QUIET)]
    if worker is not None:
        code, stdout, stderr = worker.run(argv_of(base, env)[3:])
    else:
        try:
            proc = subprocess.run(
                argv_of(base, env), cwd=ROOT, env=env.vars, capture_output=True, text=True, timeout=TIMEOUT_S
            )
        except subprocess.TimeoutExpired as e:
            raise PlaybookError(f"timed out after {TIMEOUT_S} s: {cmd}") from e
        code, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    out = stdout.rstrip("\n")
    if stages:  # stdout only: an error's message is on stderr and shown whole
        out = apply_stages(out, stages)
    parts = [f"$ {cmd}"]
    if out:
        parts.append(out)
    err = "" if quiet else stderr.rstrip("\n")
    if err:
        parts.append(err)
    if code != 0:
        parts.append(f"[exit {code}]")
    text = "\n".join(parts)
    text = text.replace(str(env.tmp), "$TMP").replace(str(ROOT) + "/", "")
    return "\n".join(ln.rstrip() for ln in text.splitlines())


def _wait_http(url: str, deadline_s: float = 20.0) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status < 500:
                    return
        except OSError:
            time.sleep(0.1)
    raise PlaybookError(f"{url} did not answer within {deadline_s:.0f} s")


def render_page(text: str, env: Env, isolated: bool = False) -> str:
    """The page with every output block regenerated (``isolated``: one process per command)."""
    background: list[subprocess.Popen[bytes]] = []
    worker = None if isolated else Worker(env)
    out: list[str] = []
    pos = 0
    try:
        for m in BLOCK.finditer(text):
            out.append(text[pos : m.end("body")] + "-->\n")
            pos = m.end()
            kind, body = m.group("kind"), m.group("body")
            if kind == "wait-http":
                url = env.expand(body.strip())
                if not url.startswith("http://127.0.0.1:"):
                    raise PlaybookError(f"wait-http is loopback only: {url}")
                _wait_http(url)
                if m.group("fence"):
                    out.append(m.group("fence"))
                continue
            if kind == "background":
                (cmd,) = commands(body)
                log = open(env.tmp / f"bg{len(background)}.log", "wb")  # noqa: SIM115 - closed with the process
                background.append(
                    subprocess.Popen(
                        argv_of(cmd, env), cwd=ROOT, env=env.vars, stdout=log, stderr=subprocess.STDOUT
                    )
                )
                block = f"$ {cmd} &"
            else:
                block = "\n\n".join(run_one(c, env, worker) for c in commands(body))
            out.append(f"```text\n{block}\n```\n")
        out.append(text[pos:])
    finally:
        if worker is not None:
            worker.close()
        for p in background:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    return "".join(out)


def regenerate(page: Path, isolated: bool = False) -> tuple[Path, str, str, float]:
    t0 = time.monotonic()
    old = page.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory(prefix="gpuplan-playbook-") as d:
        new = render_page(old, Env.make(Path(d)), isolated)
    return page, old, new, time.monotonic() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="rewrite nothing; exit 1 with a diff on drift")
    ap.add_argument("--jobs", type=int, default=2, help="pages regenerated in parallel (default 2)")
    ap.add_argument(
        "--isolated", action="store_true", help="one process per command (slower; no shared state)"
    )
    ap.add_argument("pages", nargs="*", type=Path, help="pages to do (default: docs/playbooks/*.md)")
    a = ap.parse_args(argv)
    pages = [p.resolve() for p in a.pages] or sorted(PAGES.glob("*.md"))
    t0 = time.monotonic()
    drift = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        # longest pages first so the two workers finish together
        order = sorted(pages, key=lambda p: -p.read_text(encoding="utf-8").count("gpuplan "))
        for page, old, new, dt in ex.map(lambda p: regenerate(p, a.isolated), order):
            rel = page.relative_to(ROOT)
            if old == new:
                print(f"ok       {rel} ({dt:.1f} s)", file=sys.stderr)
                continue
            drift += 1
            if a.check:
                print(f"DRIFT    {rel} ({dt:.1f} s)", file=sys.stderr)
                sys.stdout.writelines(
                    difflib.unified_diff(
                        old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
                    )
                )
            else:
                page.write_text(new, encoding="utf-8")
                print(f"updated  {rel} ({dt:.1f} s)", file=sys.stderr)
    print(
        f"{len(pages)} pages, {drift} {'drifted' if a.check else 'updated'}, {time.monotonic() - t0:.1f} s",
        file=sys.stderr,
    )
    return 1 if a.check and drift else 0


if __name__ == "__main__":
    sys.exit(main())
