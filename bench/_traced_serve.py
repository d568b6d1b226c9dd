"""``gensokyo-idmap serve`` under tracemalloc, for ``bench/soak.py --tracemalloc`` and
``bench/memory.py --tracemalloc``.

Run: ``python bench/_traced_serve.py FOLDER SECONDS FRAMES serve --config FILE``

Starts tracemalloc with FRAMES frames per allocation, then runs the command line after
FRAMES as ``gensokyo-idmap`` would; a daemon thread dumps a snapshot into FOLDER
(``snapshot-001.pickle``, …) every SECONDS (0: never by the clock) and whenever the process
gets SIGUSR1 (the memory benchmark's points), where the benchmark reads and compares them.
A snapshot is written under a temporary name and renamed: a file of that name is whole.
Nothing of bench/_common.py is imported: the daemon must log and run exactly as it ships.
"""

from __future__ import annotations

import signal
import sys
import threading
import tracemalloc
from pathlib import Path


def _snapshots(folder: Path, seconds: float, asked: threading.Event) -> None:
    n = 0
    while True:
        asked.wait(seconds if seconds > 0 else None)
        asked.clear()
        n += 1
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        part = folder / f"snapshot-{n:03d}.part"
        snapshot.dump(str(part))
        part.rename(folder / f"snapshot-{n:03d}.pickle")


def main() -> None:
    folder, seconds, frames = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    tracemalloc.start(frames)
    asked = threading.Event()
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: asked.set())
    threading.Thread(target=_snapshots, args=(folder, seconds, asked),
                     name="bench-tracemalloc", daemon=True).start()
    from gensokyo_idmap.cli import main as cli

    sys.argv = ["gensokyo-idmap", *sys.argv[4:]]
    cli()


if __name__ == "__main__":
    main()
