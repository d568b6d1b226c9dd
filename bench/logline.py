"""Log-line benchmark: what one info line costs through the daemon's logging set-up (issue 18).

Run: ``.venv/bin/python bench/logline.py [--quick] [--strict] [--profile]``

This is a benchmark script, not a test. It prints the CPU time of one log call, best of
several interleaved rounds; it has no target (``--strict`` never fails it).

Every hot-path info line pays this: ``[idmap] identity create`` was about half the CPU of
allocating a new identity. The call timed is that line as :mod:`gensokyo_idmap.idmap` makes
it (a logger bound once, ``key`` and ``vuin``, a fresh key and vUIN each call), through
``configure_logging`` exactly as the daemon calls it: level filtering, level and timestamp,
secret redaction, the renderer, the console's log tail and the buffered stderr writer. fd 2
points at ``/dev/null`` while timing (the writer writes to the real file descriptor, so the
write system calls of its flush thread are paid as in production).

Figures (us per call)
---------------------
debug, filtered
    ``log.debug`` at level info: the floor of any call (the filtering bound logger's no-op).
info, dropped
    ``log.info`` through structlog with one processor that drops the event: what structlog's
    own call machinery costs before any processor of ours runs.
info, json / info, console
    The ``[idmap] identity create`` line with ``log.format: json`` and ``console``.

``--profile`` also prints a cProfile of each format (not part of the figures).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

import _common  # noqa: F401  (configures structlog before the library is imported)
import structlog
from _common import Run, print_heading

from gensokyo_idmap.logging import configure_logging, flush_logs

KEYS = [f"openid:QQ:102000001:{i:032X}" for i in range(4096)]


def _drop(_logger: Any, _method: str, _event: MutableMapping[str, Any]) -> Any:
    raise structlog.DropEvent


def _bound(fmt: str) -> Any:
    """A logger as a hot object binds it, after the set-up of ``fmt`` (the bound logger
    keeps the processors configured when it was bound)."""
    if fmt == "dropped":
        structlog.configure(processors=[_drop],
                            wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
                            cache_logger_on_first_use=False)
    else:
        configure_logging("info", "json" if fmt == "json" else "console")
    return structlog.get_logger("gensokyo_idmap.idmap").bind()


def _calls(fmt: str, n: int) -> Callable[[], None]:
    log = _bound(fmt)
    call = log.debug if fmt == "filtered" else log.info

    def loop() -> None:
        for i in range(n):
            call("[idmap] identity create", key=KEYS[i & 4095], vuin=1_000_000 + i)
    return loop


@contextmanager
def stderr_to_devnull() -> Iterator[None]:
    """fd 2 on /dev/null (lines written, nobody reads them), then back."""
    saved = os.dup(2)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    try:
        yield
    finally:
        flush_logs()
        os.dup2(saved, 2)
        os.close(null)
        os.close(saved)


FIGURES = {"filtered": "debug, filtered", "dropped": "info, dropped",
           "json": "info, json", "console": "info, console"}


def main() -> int:
    run = Run(__doc__, quick="fewer calls and rounds", strict="no target: never fails",
              profile="also cProfile each format")
    n, rounds = (20_000, 3) if run.quick else (100_000, 7)
    best = {fmt: float("inf") for fmt in FIGURES}
    with stderr_to_devnull():
        for _ in range(rounds):
            for fmt in FIGURES:
                loop = _calls(fmt, n)
                started = time.process_time()
                loop()
                best[fmt] = min(best[fmt], (time.process_time() - started) / n * 1e6)
    print(f"gensokyo-idmap log-line benchmark ({'quick' if run.quick else 'full'}): "
          f"{n:,} calls per figure, best of {rounds} interleaved rounds, CPU time")
    print_heading(f"  {'figure':<18} {'us/call':>8}")
    for fmt, name in FIGURES.items():
        print(f"  {name:<18} {best[fmt]:>8.2f}")
    if run.profile:
        import cProfile
        import pstats

        for fmt in ("json", "console"):
            loop = _calls(fmt, n)
            prof = cProfile.Profile()
            with stderr_to_devnull():
                prof.runcall(loop)
            print(f"\n--- cProfile: info, {fmt}, by tottime ---")
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
    print()
    print(run.summary())
    return run.exit_code()


if __name__ == "__main__":
    raise SystemExit(main())
