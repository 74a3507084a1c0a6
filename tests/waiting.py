"""Waiting in tests on a condition, not for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 10.0, what: str = "the condition") -> None:
    """Poll ``condition`` every 5 ms until it is true; fail the test if ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.005)
