"""Headless Chromium (Debian's package) driven by Playwright, for status-page tests."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tests.optional_tools import unavailable

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> str | None:
    return os.environ.get("DRKIT_CHROMIUM") or shutil.which("chromium")


@contextmanager
def open_page(url: str, screenshot: Path) -> Iterator[Any]:
    """A loaded page; a full-page screenshot is saved to ``screenshot`` on the way out."""
    executable = chromium_path()
    if executable is None:
        unavailable("BROWSER", "no chromium", "apt install chromium (or set DRKIT_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(url, wait_until="load")
            yield page
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
