"""A web request past its time limit is answered 422 and its work is killed: no CPU after the
answer (issue 22: a search kept computing ~45 s past its 422 in an abandoned thread)."""

from __future__ import annotations

import multiprocessing
import resource
import time

import pytest
from fastapi.testclient import TestClient

from gpuplan.interfaces.web import api, isolated
from gpuplan.interfaces.web.app import create_app

pytestmark = pytest.mark.skipif(not isolated.FORK_AVAILABLE, reason="fork is POSIX-only")

HEAVY = {  # P99 sizing over the whole catalog: seconds of simulation
    "model": "meta-llama/Llama-3.1-70B",
    "workload": {"input_tokens": 2048, "output_tokens": 300, "rate_rps": 5},
    "sla": {"ttft_p99_ms": 2000, "tpot_p99_ms": 100},
}


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def test_work_past_the_limit_stops_with_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api, "TIME_LIMIT_S", 0.3)
    client = TestClient(create_app(), raise_server_exceptions=False)
    started = time.monotonic()
    answer = client.post("/api/recommend", json=HEAVY)
    assert answer.status_code == 422 and "0 s limit" in answer.json()["error"]
    assert time.monotonic() - started < 5
    assert multiprocessing.active_children() == []
    before = _cpu_s()
    time.sleep(1.0)
    assert _cpu_s() - before < 0.2  # nothing of the request still computes
