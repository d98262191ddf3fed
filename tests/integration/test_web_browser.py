"""The real page in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by Selenium).

Starts ``gpuplan web``'s app on 127.0.0.1 at a free port, fills the form, waits for the plan table and
the Pareto chart, checks the top plan against the API, saves a screenshot, then types a bad value
and checks that the CLI's one-line error appears next to that field. Skips when Chromium, its
driver or Selenium is missing.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("selenium")

import uvicorn
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

from gpuplan.interfaces.web.app import create_app

Invoke = Callable[..., Any]
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)
CHROMEDRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
FORM = {
    "model": "meta-llama/Llama-3.1-8B",
    "input_tokens": "2048",
    "output_tokens": "300",
    "load": "20",
    "ttft_ms": "1000",
    "tpot_ms": "50",
    "gpus": "L4,A10G,L40S,H100-SXM",
}
BODY = {
    "model": "meta-llama/Llama-3.1-8B",
    "objective": "cost",
    "workload": {"input_tokens": 2048, "output_tokens": 300, "rate_rps": 20},
    "sla": {"ttft_ms": 1000, "tpot_ms": 50},
    "hardware": {"gpus": ["L4", "A10G", "L40S", "H100-SXM"], "max_gpus": 64},
    "precision": {"allowed": ["bf16", "fp8", "int4"]},
}

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = _free_port()
    config = uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not srv.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the web server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    assert CHROMIUM is not None  # the module is skipped without it
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1400,2200",
        f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


def _fill(driver: Any, values: dict[str, str]) -> None:
    for field_id, value in values.items():
        element = driver.find_element(By.ID, field_id)
        element.clear()
        element.send_keys(value)


def _open(driver: Any, server: str) -> None:
    """Load the page and wait for its first answer (the form's defaults)."""
    driver.get(f"{server}/")
    _wait(
        driver,
        "the first answer",
        lambda d: d.execute_script("return document.body.dataset.state") == "ready",
    )


def _top_row(driver: Any) -> list[str]:
    cells: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#plans tbody tr.best td')].map((td) => td.textContent)"
    )
    return cells


def _wait(driver: Any, what: str, condition: Callable[[Any], Any], timeout_s: float = 30) -> Any:
    try:
        wait = WebDriverWait(
            driver, timeout_s, poll_frequency=0.2, ignored_exceptions=[StaleElementReferenceException]
        )
        return wait.until(condition)
    except TimeoutException:
        state = driver.execute_script("return document.body.dataset.state")
        status = driver.find_element(By.ID, "status").text
        pytest.fail(f"timed out waiting for {what}; page state {state!r}, status {status!r}")


def test_page_answers_like_the_api_and_shows_cli_errors(server: str, browser: Any, invoke: Invoke) -> None:
    import httpx

    api = httpx.post(f"{server}/api/recommend", json=BODY, timeout=60).json()
    best = api["plans"][0]
    expected = [
        best["gpu"],
        str(best["count"]),
        str(best["tp"]),
        str(best["pp"]),
        str(best["replicas"]),
        best["weight_dtype"],
    ]

    _open(browser, server)
    _fill(browser, FORM)
    _wait(browser, "the top plan to match the API", lambda d: _top_row(d)[:6] == expected)
    points = _wait(
        browser,
        "the Pareto chart",
        lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-pareto .scatterlayer .point"),
    )
    assert len(points) == len(api["plans"])
    _wait(
        browser,
        "the memory chart",
        lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-memory .barlayer .point"),
    )
    _wait(
        browser, "the GPU table", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#gpu-table tbody tr")) > 5
    )

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web_page.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000

    cli = invoke(
        "recommend",
        "--model",
        FORM["model"],
        "--input-tokens",
        "-5",
        "--output-tokens",
        "300",
        "--rate",
        "20",
    )
    cli_line = cli.error_line()
    _fill(browser, {"input_tokens": "-5"})
    shown = _wait(
        browser, "the error next to input tokens", lambda d: d.find_element(By.ID, "err-input_tokens").text
    )
    assert shown == cli_line.replace("--input-tokens:", "workload.input_tokens:")  # the CLI names its flag
    assert shown.startswith("error: workload.input_tokens")

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE" and "/api/" not in e["message"]]
    assert not severe, severe


TRAIN_FORM = {
    "model": "meta-llama/Llama-3.1-8B",
    "tokens": "100000000",
    "seq_len": "4096",
    "gpus": "L40S,H100-SXM",
    "max_gpus": "8",
}
TRAIN_BODY = {
    "model": "meta-llama/Llama-3.1-8B",
    "method": "lora",
    "tokens": 1e8,
    "seq_len": 4096,
    "gpus": ["L40S", "H100-SXM"],
    "max_gpus": 8,
    "objective": "time",
}


def _rows(driver: Any, table: str) -> list[list[str]]:
    rows: list[list[str]] = driver.execute_script(
        f"return [...document.querySelectorAll('#{table} tbody tr')]"
        ".map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent))"
    )
    return rows


def test_training_view_answers_like_the_api(server: str, browser: Any, invoke: Invoke) -> None:
    import httpx

    api = httpx.post(f"{server}/api/train-plan", json=TRAIN_BODY, timeout=60).json()
    expected = [[p["gpu"], str(p["gpus"]), p["layout"]] for p in api["plans"]]

    _open(browser, server)
    browser.find_element(By.ID, "wl-training").click()
    assert not browser.find_element(By.ID, "input_tokens").is_displayed()
    Select(browser.find_element(By.ID, "method")).select_by_value("lora")
    _fill(browser, TRAIN_FORM)
    _wait(
        browser,
        "the training plans to match the API",
        lambda d: [row[:3] for row in _rows(d, "train-plans")] == expected,
    )
    points = _wait(
        browser,
        "the cost vs time-to-train chart",
        lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-train-pareto .scatterlayer .point"),
    )
    assert len(points) == len(api["plans"])
    _wait(
        browser,
        "the training memory chart",
        lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-train-memory .barlayer .point"),
    )
    assert not browser.find_element(By.ID, "plans").is_displayed()

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "web_training.png"
    browser.save_screenshot(str(shot))
    print(f"screenshot: {shot}")
    assert shot.stat().st_size > 10_000

    cli = invoke("train-plan", "--model", TRAIN_FORM["model"], "--tokens", "1e8", "--seq-len", "-3")
    _fill(browser, {"seq_len": "-3"})
    shown = _wait(browser, "the error next to seq_len", lambda d: d.find_element(By.ID, "err-seq_len").text)
    assert shown == "error: seq_len: Input should be greater than or equal to 1"  # the form's field
    assert cli.error_line() == "error: --seq-len: Input should be greater than or equal to 1"  # the flag

    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE" and "/api/" not in e["message"]]
    assert not severe, severe


def test_api_docs_render_from_local_assets(server: str, browser: Any) -> None:
    from gpuplan.interfaces.web.app import docs_assets

    if docs_assets() is None:
        pytest.skip("fastapi-offline is not installed: /docs loads Swagger UI from a CDN")
    browser.get(f"{server}/docs")
    paths = _wait(
        browser,
        "Swagger UI to list the API",
        lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")],
    )
    assert "/api/train-plan" in " ".join(paths)


def test_page_sizes_on_p99_when_asked(server: str, browser: Any) -> None:
    _open(browser, server)
    _fill(browser, {**FORM, "gpus": "L4", "input_tokens": "512", "output_tokens": "128", "load": "8"})
    Select(browser.find_element(By.ID, "sla_stat")).select_by_value("p99")

    def header(d: Any) -> list[str]:
        cells: list[str] = d.execute_script(
            "return [...document.querySelectorAll('#plans thead th')].map((th) => th.textContent)"
        )
        return cells

    _wait(
        browser,
        "the P99 columns",
        lambda d: "P99 TTFT ms" in header(d) and "P99 from" in header(d) and _top_row(d),
        timeout_s=60,
    )
