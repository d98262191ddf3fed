"""The real page in headless Chromium (Debian's ``chromium`` + ``chromium-driver``, driven by Selenium).

Starts ``gpuplan web``'s app on 127.0.0.1 at a free port, fills the form, waits for the plan table and
the Pareto chart, checks the top plan against the API, saves a screenshot, then types a bad value
and checks that the CLI's one-line error appears next to that field (named as the form labels it).
Also: results are marked stale while they do not answer the form; the P99 table and the chart show
the same statistic; at 375 px the page reflows without sideways scrolling. Skips when Chromium, its
driver or Selenium is missing.
"""

from __future__ import annotations

import re
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
    # The CLI's message, with the field named as the form labels it (the CLI names its flag).
    assert cli_line.startswith("error: --input-tokens: ")
    assert shown == cli_line.replace("--input-tokens", "input tokens", 1)

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
    assert cli.error_line() == "error: --seq-len: Input should be greater than or equal to 1"  # the flag
    assert shown == "error: sequence length: Input should be greater than or equal to 1"  # the form's label

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
    # the L40S: rented on the default price basis (the L4 is not), and the page has no provider field
    _fill(browser, {**FORM, "gpus": "L40S", "input_tokens": "512", "output_tokens": "128", "load": "8"})
    Select(browser.find_element(By.ID, "sla_stat")).select_by_value("p99")

    def header(d: Any) -> list[str]:
        cells: list[str] = d.execute_script(
            "return [...document.querySelectorAll('#plans thead th')].map((th) => th.textContent)"
        )
        return cells

    _wait(
        browser,
        "the P99 columns",
        lambda d: "P99 TTFT ms" in header(d) and "P99 from" in header(d) and _ready(d),
        timeout_s=60,
    )
    # The chart draws the table's statistic: each plan's point (by its rank) sits at the table's P99 TTFT,
    # and the axis says P99.
    column = header(browser).index("P99 TTFT ms")
    # a cell is the figure and its interval, "412 (350-980)": the chart draws the figure
    table = {rank: row[column].split(" (")[0] for rank, row in enumerate(_rows(browser, "plans"), start=1)}
    chart: dict[str, str] = browser.execute_script(
        "const points = {};"
        "for (const t of document.getElementById('chart-pareto').data) {"
        "  if (t.name === 'Pareto front') continue;"
        "  t.text.forEach((label, i) => { points[parseInt(label)] = fmt(t.y[i]); });"
        "}"
        "return points;"
    )
    assert {int(rank): value for rank, value in chart.items()} == table
    title = browser.execute_script("return document.getElementById('chart-pareto').layout.yaxis.title.text")
    assert title.startswith("P99 TTFT")
    assert "P99 TTFT" in browser.find_element(By.ID, "latency-note").text


def _ready(driver: Any) -> bool:
    """An answer is shown and it answers the form as it is now."""
    state, stale = driver.execute_script("return [document.body.dataset.state, document.body.dataset.stale]")
    return bool(state == "ready" and stale == "false" and _top_row(driver))


def _stale(driver: Any) -> bool:
    """The results are marked stale: the banner is shown and the answer dimmed."""
    banner = driver.find_element(By.ID, "stale")
    answer = driver.find_element(By.CSS_SELECTOR, "#results .infer.answer")
    return bool(banner.is_displayed() and float(answer.value_of_css_property("opacity")) < 0.5)


def test_results_are_marked_stale_until_inputs_answer_again(server: str, browser: Any) -> None:
    _open(browser, server)
    _fill(browser, FORM)
    _wait(browser, "the answer to the form", _ready)
    assert not _stale(browser)
    answered = _top_row(browser)

    _fill(browser, {"input_tokens": "-5"})  # the server refuses it
    shown = _wait(browser, "the error", lambda d: d.find_element(By.ID, "err-input_tokens").text)
    assert shown == "error: input tokens: Input should be greater than or equal to 1"
    assert _stale(browser)
    assert browser.find_element(By.ID, "stale").text == "stale: inputs changed — run again"
    assert browser.find_element(By.ID, "input_tokens").get_attribute("aria-invalid") == "true"
    assert _top_row(browser) == answered  # still shown, dimmed
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "web_stale.png"))

    _fill(browser, {"input_tokens": FORM["input_tokens"]})  # back to the inputs answered
    _wait(browser, "the results to be current again", lambda d: _ready(d) and not _stale(d))
    assert browser.find_element(By.ID, "err-input_tokens").text == ""

    _fill(browser, {"output_tokens": "1e"})  # not a number: the browser reads it as ""
    shown = _wait(browser, "the error", lambda d: d.find_element(By.ID, "err-output_tokens").text)
    assert shown == "error: output tokens: not a number; type one such as 300"
    assert _stale(browser)
    _fill(browser, {"output_tokens": FORM["output_tokens"]})
    _wait(browser, "the results to be current again", lambda d: _ready(d) and not _stale(d))

    # A valid change marks the answer stale at once, until the new answer arrives.
    browser.execute_script(
        "window.staleSeen = false;"
        "new MutationObserver(() => { if (document.body.dataset.stale === 'true') window.staleSeen = true; })"
        ".observe(document.body, {attributes: true});"
    )
    _fill(browser, {"load": "21"})
    _wait(browser, "the new answer", lambda d: d.execute_script("return window.staleSeen") and _ready(d))
    assert not _stale(browser)


def test_page_reflows_on_a_narrow_screen(server: str, browser: Any) -> None:
    """At 375 px (a phone), the form stacks above the results, wide tables scroll inside their box and
    the page itself does not scroll sideways."""
    width_px = 375
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width_px, "height": 812, "deviceScaleFactor": 1, "mobile": True},
    )
    try:
        _open(browser, server)
        _fill(browser, FORM)
        _wait(browser, "the answer to the form", _ready)
        _wait(
            browser,
            "the GPU table",
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "#gpu-table tbody tr")) > 5,
        )
        _wait(browser, "the Pareto chart", lambda d: d.find_elements(By.CSS_SELECTOR, "#chart-pareto .point"))
        ARTIFACTS.mkdir(exist_ok=True)
        browser.save_screenshot(str(ARTIFACTS / "web_narrow.png"))
        browser.execute_script("document.getElementById('results').scrollIntoView()")
        browser.save_screenshot(str(ARTIFACTS / "web_narrow_results.png"))
        page = browser.execute_script(
            "const r = (id) => document.getElementById(id).getBoundingClientRect();"
            "const box = document.getElementById('plans').parentElement;"
            "return {scroll: document.documentElement.scrollWidth, viewport: document.documentElement.clientWidth,"
            " formBottom: r('form').bottom, resultsTop: r('results').top,"
            " boxScroll: box.scrollWidth, boxWidth: box.clientWidth, boxRight: box.getBoundingClientRect().right,"
            " overflow: getComputedStyle(box).overflowX};"
        )
        assert page["viewport"] == width_px, page
        assert page["scroll"] <= page["viewport"], page
        assert page["formBottom"] <= page["resultsTop"], page  # stacked, not side by side
        assert page["boxScroll"] > page["boxWidth"], page  # the plans table is wider than the screen ...
        assert page["overflow"] == "auto" and page["boxRight"] <= width_px, page  # ... and scrolls in its box
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_price_basis_fields_price_both_views_like_the_api(server: str, browser: Any) -> None:
    """The Prices fields are train-plan's --provider / --price-basis and a recommend scenario's
    prices.provider / prices.basis: the page answers as the API does on that basis, names it, shows the
    training Why, and a provider the catalog does not know is the CLI's line next to the field."""
    import httpx

    api = httpx.post(f"{server}/api/train-plan", json={**TRAIN_BODY, "provider": "AWS"}, timeout=60).json()
    assert api["price_basis"]["key"] == "provider:aws"
    _open(browser, server)
    browser.find_element(By.ID, "wl-training").click()
    Select(browser.find_element(By.ID, "method")).select_by_value("lora")
    _fill(browser, {**TRAIN_FORM, "provider": "AWS"})
    _wait(
        browser,
        "the AWS-priced training plans",
        lambda d: (
            _ready(d)
            and [row[:3] for row in _rows(d, "train-plans")]
            == [[p["gpu"], str(p["gpus"]), p["layout"]] for p in api["plans"]]
        ),
    )
    note = browser.find_element(By.ID, "train-price-basis").text
    assert note == f"Prices: {api['price_basis']['label']} (every GPU on this basis)."
    why = browser.execute_script(
        "return [...document.querySelectorAll('#train-why li')].map((li) => li.textContent)"
    )
    assert why == api["why"]

    browser.find_element(By.ID, "wl-inference").click()
    _fill(browser, {**FORM, "provider": ""})
    Select(browser.find_element(By.ID, "price_basis")).select_by_value("hyperscaler")
    doc = {**BODY, "prices": {"basis": "hyperscaler"}}
    rec = httpx.post(f"{server}/api/recommend", json=doc, timeout=60).json()
    _wait(
        browser,
        "the hyperscaler-priced plans",
        lambda d: _ready(d) and d.find_element(By.ID, "price-basis").text.startswith("Prices: hyperscaler"),
    )
    assert (
        browser.find_element(By.ID, "price-basis").text
        == f"Prices: {rec['price_basis']['label']} (every GPU on this basis)."
    )
    assert _top_row(browser)[:2] == [rec["plans"][0]["gpu"], str(rec["plans"][0]["count"])]

    Select(browser.find_element(By.ID, "price_basis")).select_by_value("")
    _fill(browser, {"provider": "Nope"})
    shown = _wait(browser, "the error next to provider", lambda d: d.find_element(By.ID, "err-provider").text)
    assert shown.startswith("error: provider 'Nope' is not a provider in the catalog; valid: ")
    assert browser.find_element(By.ID, "provider").get_attribute("aria-invalid") == "true"


def _header(driver: Any) -> list[str]:
    cells: list[str] = driver.execute_script(
        "return [...document.querySelectorAll('#plans thead th')].map((th) => th.textContent)"
    )
    return cells


def test_page_shows_intervals_and_sizes_at_a_confidence(server: str, browser: Any) -> None:
    """Issue 17: the table shows each figure's interval, and the confidence control sizes the plans at
    that quantile (the API's ``confidence``), with both counts in the table and the explanation."""
    import httpx

    _open(browser, server)
    _fill(browser, {**FORM, "gpus": "L40S,H100-SXM"})
    _wait(browser, "the answer to the form", _ready)
    assert "at point" not in _header(browser)
    column = _header(browser).index("mean TPOT ms")
    cell = _top_row(browser)[column]
    assert re.fullmatch(r"[\d.,]+ \([\d.,]+-[\d.,]+\)", cell), cell  # "6.09 (5.96-16.9)"
    assert "80 % interval" in browser.find_element(By.ID, "interval-note").text
    assert "point estimate" in browser.find_element(By.ID, "interval-note").text

    _fill(browser, {"confidence": "0.9"})
    api = httpx.post(
        f"{server}/api/recommend", json={**BODY, "hardware": {"gpus": ["L40S", "H100-SXM"], "max_gpus": 64},
                                         "confidence": 0.9}, timeout=60,
    ).json()  # fmt: skip
    best = api["plans"][0]
    _wait(
        browser,
        "the plans sized at 90 % confidence",
        lambda d: (
            _ready(d) and "at point" in _header(d) and _top_row(d)[:2] == [best["gpu"], str(best["count"])]
        ),
        timeout_s=60,
    )
    at_point = _top_row(browser)[_header(browser).index("at point")]
    assert at_point == str(best["count_at_point_estimate"])
    why = browser.find_element(By.ID, "explanation").text
    line = re.search(r"(\d+)x (\S+) meet the SLA at the point estimate; (\d+) at 90% confidence", why)
    assert line is not None, why
    assert int(line.group(3)) >= int(line.group(1))
    assert "90 % confidence" in browser.find_element(By.ID, "interval-note").text
    ARTIFACTS.mkdir(exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "web_confidence.png"))

    _fill(browser, {"confidence": "1.5"})  # the server refuses it, naming the control as the form does
    shown = _wait(browser, "the error", lambda d: d.find_element(By.ID, "err-confidence").text)
    assert shown == "error: size at confidence: Input should be less than or equal to 0.99"
