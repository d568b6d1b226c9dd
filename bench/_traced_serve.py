"""``gensokyo-idmap serve`` under tracemalloc, for ``bench/soak.py --tracemalloc``.

Run: ``python bench/_traced_serve.py FOLDER SECONDS FRAMES serve --config FILE``

Starts tracemalloc with FRAMES frames per allocation, then runs the command line after
FRAMES as ``gensokyo-idmap`` would; a daemon thread dumps a snapshot every SECONDS into
FOLDER (``snapshot-001.pickle``, …), where the soak reads and compares them. Nothing of
bench/_common.py is imported: the daemon must log and run exactly as it ships.
"""

from __future__ import annotations

import sys
import threading
import time
import tracemalloc
from pathlib import Path


def _snapshots(folder: Path, seconds: float) -> None:
    n = 0
    while True:
        time.sleep(seconds)
        n += 1
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)])
        snapshot.dump(str(folder / f"snapshot-{n:03d}.pickle"))


def main() -> None:
    folder, seconds, frames = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    tracemalloc.start(frames)
    threading.Thread(target=_snapshots, args=(folder, seconds), name="soak-tracemalloc",
                     daemon=True).start()
    from gensokyo_idmap.cli import main as cli

    sys.argv = ["gensokyo-idmap", *sys.argv[4:]]
    cli()


if __name__ == "__main__":
    main()
