"""Headless Chromium for the browser tests: Debian's ``chromium`` driven by Playwright for
Python (which never downloads a browser of its own), one page per test, and where its
screenshots go.

A test module importing this is skipped, saying why, where the browser or Playwright is
absent (``.ci/run`` installs the browser); it still sets ``pytestmark = BROWSER``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("GSK_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                 "--disable-background-networking", "--disable-component-update",
                 "--no-first-run"]
#: ``build/screenshots/`` at the top of the checkout: each test module names its folder in it.
SCREENSHOT_ROOT = Path(__file__).resolve().parents[2] / "build" / "screenshots"

BROWSER = pytest.mark.skipif(not Path(CHROMIUM).exists(),
                             reason=f"no Chromium at {CHROMIUM}: `apt-get install chromium` "
                                    "(.ci/run installs it)")
async_api = pytest.importorskip("playwright.async_api",
                                reason="playwright is not installed (pip install -e '.[test]')")


@asynccontextmanager
async def chromium(*args: str, **options: Any) -> AsyncIterator[Any]:
    """A page of a fresh headless Chromium, 1280 px wide, started with :data:`CHROMIUM_ARGS`
    and ``args``; ``options`` go to Playwright's ``new_page`` (``locale="zh-CN"``: the
    browser's language and its ``Accept-Language``, ``timezone_id``…); the script errors it
    meets are kept for :func:`script_errors`."""
    async with async_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM,
                                                   args=[*CHROMIUM_ARGS, *args], headless=True)
        try:
            page = await browser.new_page(**{"viewport": {"width": 1280, "height": 1000},
                                             **options})
            page.set_default_timeout(20_000)
            errors: list[str] = []
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.console_errors = errors
            yield page
        finally:
            await browser.close()


def script_errors(page: Any) -> list[str]:
    """Script errors and Content-Security-Policy refusals the page met (a page answered
    with an error status on purpose is not one)."""
    return [text for text in page.console_errors
            if not text.startswith("Failed to load resource: the server responded")]


async def shoot(page: Any, folder: Path, name: str) -> Path:
    """A full-page screenshot of ``page`` as ``folder/name.png``: that path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    return path
