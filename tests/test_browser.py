"""A real browser: JupyterLab serves a copy of lessons/, headless Chromium opens lesson 01, runs every cell,
and sees the widgets render and the check reports appear; and a failing report shows its verdict in words
and offers a hint.

Needs Debian's chromium (`apt-get install -y chromium`) and Playwright's Python package; no browser is
downloaded. Skipped when chromium is absent, except in CI (CI=true), where that is a failure.
"""

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
LESSON = "01-factory-and-warehouse.ipynb"
FAILING = "a-failing-check.ipynb"  # written beside the lessons in the server's copy
pytestmark = pytest.mark.browser


def _require_browser():
    missing = [] if os.access(CHROMIUM, os.X_OK) else [f"{CHROMIUM} (apt-get install -y chromium)"]
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("playwright (pip install playwright; no browser download needed)")
    if missing and os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI must run the browser test, but this is missing: " + ", ".join(missing))
    if missing:
        pytest.skip("missing: " + ", ".join(missing))


def _write_failing_notebook(path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook
    nb = new_notebook(cells=[new_code_cell('from gpuprinciples import check\ncheck("factory.intensity", 0.5)')])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(path))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def jupyterlab(tmp_path):
    """A JupyterLab server on 127.0.0.1 over a temporary copy of lessons/; yields its base URL and token."""
    root = tmp_path / "lessons"
    # without the traces lesson 03 writes: under pytest-xdist it may be running beside this test
    shutil.copytree(ROOT / "lessons", root, ignore=shutil.ignore_patterns("*.trace.json", ".ipynb_checkpoints"))
    _write_failing_notebook(root / FAILING)
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp_path / "run"),
               MPLBACKEND="module://matplotlib_inline.backend_inline")
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
         f"--LabApp.workspaces_dir={tmp_path / 'workspaces'}", "--LabApp.extension_manager=readonly"]
        + (["--allow-root"] if os.geteuid() == 0 else []),
        cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (tmp_path / "jupyterlab.log").read_text())
                time.sleep(0.5)
        yield base, token
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _accept_dialogs_until(page, selector: str, timeout_s: float, count: int = 1) -> bool:
    """Wait for `count` elements matching selector; accept JupyterLab's "Select Kernel" dialog if it asks."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if page.locator(selector).count() >= count and not page.locator(".jp-Dialog").count():
            return True
        accept = page.locator(".jp-Dialog .jp-mod-accept")
        if accept.count() and accept.first.is_visible():
            accept.first.click()
        page.wait_for_timeout(2000)
    return False


def _wait_for_connected_kernel(base: str, token: str, timeout_s: float) -> None:
    """The server's word that the page's kernel is up, idle and connected (the page's own idle flag comes early)."""
    deadline = time.monotonic() + timeout_s
    kernels = None
    while time.monotonic() < deadline:
        try:
            kernels = json.load(urllib.request.urlopen(f"{base}/api/kernels?token={token}", timeout=10))
        except urllib.error.HTTPError as exc:
            # jupyter_server answers 500 when the list is asked for while a kernel is starting (its model has no
            # `last_activity` yet: KeyError in kernel_model, seen in CI on December 6); the next poll gets it
            if exc.code < 500:
                raise
            kernels = f"HTTP {exc.code}"
        else:
            if any(k["execution_state"] == "idle" and k["connections"] > 0 for k in kernels):
                return
        time.sleep(1)
    raise AssertionError(f"no connected idle kernel after {timeout_s} s: {kernels}")


def _run_all_cells(page) -> None:
    """Run > Run All Cells, again if the kernel was not ready to take it (no cell started within 30 s)."""
    started = "Array.from(document.querySelectorAll('.jp-InputArea-prompt')).some(e => /[0-9*]/.test(e.innerText))"
    for _ in range(5):
        page.locator("li.lm-MenuBar-item", has_text="Run").first.click()
        page.click("li.lm-Menu-item[data-command='runmenu:run-all']")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if page.evaluate(started):
                return
            _accept_dialogs_until(page, "body", timeout_s=2)
    raise AssertionError("Run All Cells never started a cell")


@contextmanager
def _running(base: str, token: str, notebook: str):
    """A headless Chromium on `notebook` in JupyterLab, its kernel connected and Run All Cells started: the page."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.set_default_timeout(60_000)
            page.goto(f"{base}/lab/tree/{notebook}?token={token}")
            page.wait_for_selector(".jp-Notebook .jp-Cell")
            _accept_dialogs_until(page, ".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout_s=180)
            _wait_for_connected_kernel(base, token, timeout_s=180)
            _run_all_cells(page)
            yield page
        finally:
            browser.close()


def test_lesson_01_runs_in_jupyterlab_in_a_real_browser(tmp_path, request):
    _require_browser()
    n_checks = (ROOT / "lessons" / LESSON).read_text().count('check(\\"')
    assert n_checks >= 3
    base, token = request.getfixturevalue("jupyterlab")
    with _running(base, token, LESSON) as page:
        # every check shows its report (the lesson's stubs say "not attempted yet")
        if not _accept_dialogs_until(page, ".gp-report", timeout_s=600, count=n_checks):
            page.screenshot(path=str(tmp_path / "timed-out.png"))
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            raise AssertionError(f"{page.locator('.gp-report').count()} of {n_checks} reports appeared; "
                                 f"screenshot {tmp_path / 'timed-out.png'}; outputs: {outputs}")
        slider = page.locator(".jupyter-widgets.widget-slider, .widget-slider").first
        slider.wait_for(state="visible")
        tracebacks = page.locator(".jp-RenderedText[data-mime-type='application/vnd.jupyter.error']")
        assert tracebacks.count() == 0, tracebacks.first.inner_text()
        assert "NOT ATTEMPTED" in page.locator(".gp-report").first.text_content()
        no_news = page.get_by_role("button", name="No", exact=True)  # the "Jupyter news?" toast
        if no_news.count() and no_news.first.is_visible():
            no_news.first.click()
        panel = page.locator(".jp-NotebookPanel").first
        slider.evaluate("e => e.closest('.jp-Cell').scrollIntoView()")
        panel.screenshot(path=str(tmp_path / "lesson01-widget.png"))
        page.locator(".gp-report").first.evaluate("e => e.closest('.jp-Cell').scrollIntoView()")
        panel.screenshot(path=str(tmp_path / "lesson01-report.png"))
    assert (tmp_path / "lesson01-widget.png").stat().st_size > 10_000


def test_a_failing_report_says_so_in_words_and_offers_a_hint(tmp_path, request, monkeypatch):
    """What a learner sees when a check fails: FAILED in words (not a colour, not an emoji) and how to ask for
    the next hint, in the rendered page, not only in the HTML string."""
    _require_browser()
    monkeypatch.setenv("GPUPRINCIPLES_CACHE_DIR", str(tmp_path / "hints"))  # the server's kernels inherit it
    monkeypatch.delenv("GPUPRINCIPLES_HINTS", raising=False)
    base, token = request.getfixturevalue("jupyterlab")
    with _running(base, token, FAILING) as page:
        if not _accept_dialogs_until(page, ".gp-report", timeout_s=300):
            page.screenshot(path=str(tmp_path / "timed-out.png"))
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            raise AssertionError(f"no report appeared; outputs: {outputs}")
        report = page.locator(".gp-report").first
        report.scroll_into_view_if_needed()
        shown = report.inner_text()  # what is on screen, as rendered
        assert shown.lstrip().startswith("FAILED") and "factory.intensity" in shown, shown
        assert "off by more than 2%" in shown and "✅" not in shown and "❌" not in shown, shown
        offer = page.locator(".gp-report .gp-hint").first
        assert offer.is_visible()
        assert 'Stuck? Run hint("factory.intensity")' in offer.inner_text()
        assert "hint 1 of" in offer.inner_text()
        report.screenshot(path=str(tmp_path / "failing-report.png"))
    assert (tmp_path / "failing-report.png").stat().st_size > 2_000
