"""``gensokyo-idmap serve`` under tracemalloc, for ``bench/soak.py --tracemalloc`` and
``bench/memory.py --tracemalloc``, or with the allocators' own figures, for
``bench/memory.py --mallocstats``.

Run: ``python bench/_traced_serve.py FOLDER SECONDS FRAMES serve --config FILE``

With FRAMES > 0, starts tracemalloc with FRAMES frames per allocation, then runs the
command line after FRAMES as ``gensokyo-idmap`` would; a daemon thread dumps a snapshot into
FOLDER (``snapshot-001.pickle``, …) every SECONDS (0: never by the clock) and whenever the
process gets SIGUSR1 (the memory benchmark's points), where the benchmark reads and compares
them. With FRAMES 0, no tracemalloc: each dump is a text report instead
(``snapshot-001.txt``): ``sys._debugmallocstats()`` (pymalloc's arenas and pools),
glibc's ``malloc_stats()`` (each malloc arena), the live objects per type and the largest
containers (what holds a table grown for more than it holds). A file of that name is whole
(written under a temporary name and renamed). Nothing of bench/_common.py is imported: the
daemon must log and run exactly as it ships.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import signal
import sys
import tempfile
import threading
import tracemalloc
from collections import Counter
from pathlib import Path

#: Containers at least this large (sys.getsizeof, bytes) are listed in a text report.
LARGE = 64 * 1024


def _c_stderr(write: object) -> str:
    """What ``write()`` prints on the C level's stderr (fd 2), captured."""
    with tempfile.TemporaryFile() as out:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)
        try:
            write()  # type: ignore[operator]
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        return out.read().decode(errors="replace")


def _owner(obj: object) -> str:
    """What holds ``obj``: the types of its referrers (and an attribute name where one is)."""
    found = []
    for ref in gc.get_referrers(obj):
        if isinstance(ref, dict):
            name = next((k for k, v in ref.items() if v is obj), None)
            holders = [type(r).__qualname__ for r in gc.get_referrers(ref)
                       if getattr(r, "__dict__", None) is ref]
            found.append(f"{'/'.join(holders) or 'dict'}.{name}")
        elif type(ref).__name__ != "frame" and ref is not None:
            found.append(type(ref).__qualname__)
    return ", ".join(found[:4])


def report() -> str:
    lines = [f"threads: {', '.join(t.name for t in threading.enumerate())}"]
    objects = gc.get_objects()
    kinds = Counter(type(o).__qualname__ for o in objects)
    lines.append(f"gc objects: {len(objects)}")
    lines += [f"  {n:>9,} {kind}" for kind, n in kinds.most_common(40)]
    large = sorted(((sys.getsizeof(o), o) for o in objects
                    if isinstance(o, dict | set | list | bytearray)
                    and sys.getsizeof(o) >= LARGE), key=lambda t: -t[0])
    lines.append(f"containers >= {LARGE // 1024} KiB: {len(large)}")
    for size, obj in large[:30]:
        lines.append(f"  {size / 1024:>9.0f} KiB {type(obj).__qualname__} len {len(obj):,}"
                     f"  held by {_owner(obj)}")
    del objects, large
    lines.append(_c_stderr(sys._debugmallocstats))
    libc = ctypes.util.find_library("c")
    if libc is not None:
        lines.append(_c_stderr(ctypes.CDLL(libc).malloc_stats))
    return "\n".join(lines) + "\n"


def _snapshots(folder: Path, seconds: float, asked: threading.Event, traced: bool) -> None:
    n = 0
    while True:
        asked.wait(seconds if seconds > 0 else None)
        asked.clear()
        n += 1
        part = folder / f"snapshot-{n:03d}.part"
        if traced:
            snapshot = tracemalloc.take_snapshot().filter_traces(
                [tracemalloc.Filter(False, tracemalloc.__file__)])
            snapshot.dump(str(part))
            part.rename(folder / f"snapshot-{n:03d}.pickle")
        else:
            part.write_text(report())
            part.rename(folder / f"snapshot-{n:03d}.txt")


def main() -> None:
    folder, seconds, frames = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
    if frames > 0:
        tracemalloc.start(frames)
    asked = threading.Event()
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: asked.set())
    threading.Thread(target=_snapshots, args=(folder, seconds, asked, frames > 0),
                     name="bench-tracemalloc", daemon=True).start()
    from gensokyo_idmap.cli import main as cli

    sys.argv = ["gensokyo-idmap", *sys.argv[4:]]
    cli()


if __name__ == "__main__":
    main()
