"""Legacy migration benchmark: the old daemon's bbolt ``idmap.db`` into fresh stores (issue 4).

Run: ``.venv/bin/python bench/migration.py [--quick] [--strict] [--profile]``

This is a benchmark script, not a test. One run prints the migration time of the medium
legacy fixture, its throughput, the peak memory of migrating files of two sizes, a check of
2,000 sampled mappings, and the two targets. The exit code is 0 unless ``--strict`` is given
and a target is missed, or the sampled mappings do not check out (exit 1 always: then the
figures are of a migration that does not work). ``--quick`` times one round instead of 3
(and one reader pass instead of 3); it still uses the medium file, the only big one, and
still measures memory on both files (~1 min instead of ~1.5 min, most of it the traced run).

The legacy files
----------------
medium-counter.db
    ``medium-counter.db.xz`` from the shared fixtures (``../shared/fixtures/legacy/`` next to
    the repository, or ``$LEGACY_FIXTURES``), unpacked with Python's lzma into the run's temp
    dir (56 MiB; its size and sha256 are checked against ``medium-counter.summary.json``).
    Counter mode, 50,000 users + 2,000 groups = 52,000 forward ids each with its ``row-<n>``
    reverse key (104,001 ``ids`` entries with ``currentRow``), 200,001 ``cache`` entries, no
    config, no UserInfo, no noise. The file was just written, so it is in the page cache: the
    figures are CPU-bound, not disk-bound.
small-counter.db
    ``tests/fixtures/legacy/small-counter.db`` (512 KiB, 224 identities, 1,150 ``ids`` and
    1,003 ``cache`` entries, pro pairs, rebinds, config, UserInfo and noise), copied into the
    temp dir. Only for the memory comparison.
empty.db
    ``tests/fixtures/legacy/empty.db`` (the four empty buckets). Each memory process migrates
    it once to warm up and once traced: the fixed cost any migration pays.

The AppID is the summary's ``settings.appid`` (102076543).

Figures
-------
migrate_legacy
    ``migrate_legacy(medium, identity_store, msgid_store, app_id, progress=...)`` into fresh
    stores (a new directory per round, ``LmdbIdentityStore`` and ``open_msgid_store`` with
    their default map sizes, durable, as ``gensokyo-idmap migrate`` opens them), timed with
    ``perf_counter`` around the call: everything the command does between opening and closing
    the stores (the sha256 of the legacy file for the marker, the ``cache`` pass, the msgid
    counter transaction, the conversion passes, the verification, the marker and the commit
    with its fsync). Best of 3 rounds (1 with ``--quick``), all rounds listed.
identities/s
    ``report.written["identity_to_vuin"]`` (52,000) / seconds. Target: >= 100,000, i.e. the
    medium file in at most 0.52 s.
ids entries/s
    ``report.read["ids"]`` (104,001 legacy ``ids`` entries) / seconds; ``all entries/s``
    counts every bucket read (``ids`` + ``cache`` + ``config`` + ``UserInfo``).
stages
    The time between the ``progress(stage, done, total)`` calls ``migrate_legacy`` makes, in
    the best round, each segment labelled by the call that ends it (a stage's first call
    only). At the time of writing those calls are: ``ids forward`` when the forward work
    starts (after the ``ids`` entries were counted from the page headers), then every 5,000
    ``ids`` entries; ``ids reverse keys`` when the reverse work starts (at the first ``row-``
    key: the forward and reverse work share one pass over ``ids`` when every forward key
    sorts before the ``row-`` keys, as in the medium file, else a second pass starts), then
    every 5,000 entries; ``ids pro keys`` when the pro pass starts (it runs only when the
    file has pro keys); ``verifying`` after the pro pass, the re-issue and the config/UserInfo
    copies; ``verified`` after the verification pass (which also notes the rebuilt reverse
    sides) and the counts. What follows is the marker and the commit.
reader alone
    The same file through the reader, no conversion: the sha256 of the file in 1 MiB reads
    (what ``migrate_legacy`` computes for the marker), one ``BoltFile.items`` pass over
    ``ids`` and over ``cache``, and one ``BoltFile.pages`` pass over ``ids`` (the same
    entries, one list per leaf page: what the migration's hot loops use); best of 3 passes,
    1 with ``--quick``. ``migrate_legacy`` reads ``ids`` twice on the medium file (the fused
    forward and reverse pass, and the verification) and ``cache`` only by one lookup of
    ``cache/currentRow``, so these bound what the reading alone costs.

Verification
------------
After each timed round, on its stores: every one of the 2,000 ``ids.forward_sample`` entries
of the summary (32-hex OpenID → row) must have ``vuin_of(openid:QQ:<appid>:<id>)`` equal to
its row; the marker must be present; ``identity_to_vuin`` must hold the summary's
``forward_count`` entries; ``meta.vuin_counter`` must be >= ``ids.current_row``; the msgid
counter must be the summary's ``cache.current_row``; the ``ids`` and ``cache`` entries read
must be the summary's ``key_counts``.

Memory
------
Each file is migrated in a fresh process (``multiprocessing``, spawn), so its peak RSS
belongs to that file alone; these run first, before the timed rounds. The process imports
the library, migrates ``empty.db`` untraced (warm-up: lazy imports, logger caches, LMDB),
then ``empty.db`` traced, then the file traced, each into fresh stores. Traced means
``tracemalloc.start()`` just before the call and ``tracemalloc.get_traced_memory()[1]``
(the peak of Python allocations alive at one time during the call) just after; tracemalloc
slows the migration several times, so these runs are not timed. The ``progress`` callback
samples ``RssAnon``, ``RssFile`` and ``VmHWM`` of ``/proc/self/status`` at each stage and
after the call (its own reads allocate a few hundred bytes, traced too).

Peak RSS is printed before the traced file run (interpreter, imports, warm-up) and after,
twice: ``ru_maxrss`` (``getrusage``), and ``VmHWM``. On Linux a child's ``ru_maxrss``
starts at the parent's peak RSS when it forked (the kernel carries it across ``exec``), so
it can hide the child's own peak under the parent's; ``VmHWM`` is the high-water mark of
the child's own memory only, and its growth is the figure to read. RSS counts more than
Python's allocations: the dirty pages LMDB keeps in anonymous memory until the commit of
the one write transaction, and touched pages of the memory-mapped store files. Those grow
with the new store, i.e. with what the migration writes, not with the legacy file it reads.

The criterion: memory must not grow with the file (stream, don't load it whole). A
migration that held the file, or a fixed share of its entries, would have a traced peak
growing like the file: a peak ratio (medium / small) near the size ratio (56 MiB / 512 KiB
= 112x). A streaming one holds a root-to-leaf path of pages and per-entry objects that die
at once, so its peak is mostly fixed (the 1 MiB sha256 read buffer, the page being decoded)
and grows far slower. PASS if ``traced peak ratio < 0.25 x file size ratio`` (the peak grows
less than a quarter as fast as the file). The peak above the empty file's is printed too:
that part is what depends on the file, and its ratio shows how far from flat memory is (the
set of confirmed row numbers, for example, does grow with the number of identities).

``--profile`` also prints a cProfile of one more medium migration (fresh stores, not part
of the figures; the profiler roughly doubles the time): the top functions by own time and
the cumulative time of each stage function of ``migrate/legacy.py``.
"""

from __future__ import annotations

import gc
import hashlib
import json
import lzma
import multiprocessing
import os
import resource
import shutil
import sys
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# _common before the library: importing it configures structlog (see its docstring).
from _common import Run, print_heading

from gensokyo_idmap.identity import OpenId
from gensokyo_idmap.runtime.lmdb import open_msgid_store
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore
from migrate.bbolt import BoltFile
from migrate.legacy import MARKER, MigrationReport, migrate_legacy
from migrate.progress import Progress

REPO = Path(__file__).resolve().parent.parent
TEST_FIXTURES = REPO / "tests" / "fixtures" / "legacy"
SHARED_FIXTURES = Path(os.environ.get("LEGACY_FIXTURES")
                       or REPO.parent / "shared" / "fixtures" / "legacy")
MEDIUM = "medium-counter"
DEFAULT_APP_ID = "102076543"
IDENTITY_TARGET = 100_000.0  # identities migrated per second
MEMORY_SHARE = 0.25  # the traced peak may grow at most this share as fast as the file
CHUNK = 1 << 20
#: What happens before each progress call of migrate_legacy (migrate/legacy.py as written).
STAGE_NOTES = {
    "ids forward": "cache/currentRow lookup, msgid counter, ids entries counted",
    "ids reverse keys": "forward work (up to the first row- key)",
    "ids pro keys": "reverse work (same pass when fused; else a second pass)",
    "verifying": "pro pass (only with pro keys), re-issue, config/UserInfo copies",
    "verified": "verify pass, counts",
    "end of the call": "marker, commit (fsync), waiting for the sha256 thread",
}

# --- the legacy files ---------------------------------------------------------------------


def load_summary() -> dict[str, Any]:
    for folder in (SHARED_FIXTURES, TEST_FIXTURES):
        path = folder / f"{MEDIUM}.summary.json"
        if path.is_file():
            loaded: dict[str, Any] = json.loads(path.read_text())
            return loaded
    print(f"no {MEDIUM}.summary.json in {SHARED_FIXTURES} or {TEST_FIXTURES}")
    raise SystemExit(2)


def unpack_medium(summary: dict[str, Any], target: Path) -> float:
    """Unpack medium-counter.db.xz to ``target`` (checked against the summary); seconds."""
    source = SHARED_FIXTURES / f"{MEDIUM}.db.xz"
    if not source.is_file():
        print(f"no {source}; set LEGACY_FIXTURES to the folder holding it")
        raise SystemExit(2)
    t = time.perf_counter()
    digest = hashlib.sha256()
    with lzma.open(source) as packed, target.open("wb") as out:
        while chunk := packed.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    elapsed = time.perf_counter() - t
    size = target.stat().st_size
    if size != summary["db_size"] or digest.hexdigest() != summary["db_sha256"]:
        print(f"{source} unpacked to {size} bytes, sha256 {digest.hexdigest()}: the summary "
              f"says {summary['db_size']} bytes, sha256 {summary['db_sha256']}")
        raise SystemExit(2)
    return elapsed


def file_sha256(path: Path) -> str:
    """The legacy file's sha256 in 1 MiB reads (as migrate_legacy computes it)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def mib(n: float) -> float:
    return n / 2**20


# --- one migration ------------------------------------------------------------------------


@dataclass
class Stages:
    """First time each progress stage was reported, from the start of the call."""

    t0: float = 0.0
    marks: list[tuple[str, float]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def __call__(self, stage: str, done: int, total: int) -> None:
        if stage not in self.seen:
            self.seen.add(stage)
            label = f"{stage!r}" + (f" at {done:,} of {total:,}" if done else "")
            self.marks.append((label, time.perf_counter() - self.t0))


class Stores:
    """Fresh openid-map.db + msgid-map.db in ``folder``, opened as ``gensokyo-idmap migrate``
    opens them (default map sizes)."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        self.folder = folder
        self.identity = LmdbIdentityStore(folder / "openid-map.db")
        try:
            self.msgid = open_msgid_store(folder / "msgid-map.db")
        except BaseException:
            self.identity.close()
            raise

    def migrate(self, legacy: Path, app_id: str,
                progress: Progress | None = None) -> MigrationReport:
        return migrate_legacy(legacy, self.identity, self.msgid, app_id, progress=progress)

    def identity_file_mib(self) -> float:
        return mib((self.folder / "openid-map.db").stat().st_size)

    def close(self, remove: bool = True) -> None:
        self.identity.close()
        self.msgid.close()
        if remove:
            shutil.rmtree(self.folder)


def verify_sample(stores: Stores, report: MigrationReport, summary: dict[str, Any],
                  app_id: str) -> list[str]:
    """What does not check out against the summary (empty: all is well)."""
    ids, cache = summary["ids"], summary["cache"]
    sample: dict[str, int] = ids["forward_sample"]
    problems: list[str] = []
    wrong: list[str] = []
    with stores.identity.read() as view:
        for openid, row in sample.items():
            got = view.vuin_of(OpenId(app_id, openid).key)
            if got != row:
                wrong.append(f"{openid} → {got}, legacy row {row}")
        marker = view.get_meta(MARKER)
        identities = view.counts().identities
        vuin_counter = view.vuin_counter()
    with stores.msgid.read() as mview:
        msg_counter = mview.msg_counter()
    if wrong:
        problems.append(f"{len(wrong)} of {len(sample)} sampled mappings wrong, e.g. "
                        + "; ".join(wrong[:3]))
    if marker is None:
        problems.append("no migration marker")
    if identities != ids["forward_count"]:
        problems.append(f"identity_to_vuin holds {identities}, the summary has "
                        f"{ids['forward_count']} forward ids")
    if vuin_counter < ids["current_row"]:
        problems.append(f"vuin_counter {vuin_counter} < legacy currentRow {ids['current_row']}")
    if msg_counter != cache["current_row"]:
        problems.append(f"msgid counter {msg_counter}, legacy cache currentRow "
                        f"{cache['current_row']}")
    if report.read.get("ids") != summary["key_counts"]["ids"]:
        problems.append(f"read {report.read.get('ids')} ids entries, the file has "
                        f"{summary['key_counts']['ids']}")
    # cache entries are not copied, so the migration reads only cache/currentRow
    return problems


# --- memory, one file per process ---------------------------------------------------------


def rss_sample(peaks: dict[str, int]) -> None:
    """Raise the noted peaks (KiB) of ``/proc/self/status`` fields (RssAnon, RssFile,
    VmHWM) to the current values."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                name, _, value = line.partition(":")
                if name in peaks:
                    peaks[name] = max(peaks[name], int(value.split()[0]))
    except OSError:
        pass


def maxrss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def memory_child(legacy: str, empty: str, folder: str, app_id: str) -> dict[str, Any]:
    """In a fresh process: warm up on empty.db, then the traced peak of empty.db and of
    ``legacy``, with ru_maxrss and the sampled RssAnon / RssFile."""
    root = Path(folder)

    def traced(path: Path, name: str, peaks: dict[str, int] | None) -> tuple[int, MigrationReport,
                                                                              float]:
        stores = Stores(root / name)
        try:
            gc.collect()
            sampler = ((lambda _stage, _done, _total: rss_sample(peaks)) if peaks is not None
                       else None)
            tracemalloc.start()
            try:
                report = stores.migrate(path, app_id, progress=sampler)
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            if peaks is not None:
                rss_sample(peaks)
            return peak, report, stores.identity_file_mib()
        finally:
            stores.close()

    warm = Stores(root / "warm-up")
    try:
        warm.migrate(Path(empty), app_id)
    finally:
        warm.close()
    empty_peak, _, _ = traced(Path(empty), "empty", None)
    before = maxrss_kib()
    hwm: dict[str, int] = {"VmHWM": 0}
    rss_sample(hwm)
    peaks = {"RssAnon": 0, "RssFile": 0, "VmHWM": 0}
    rss_sample(peaks)
    peak, report, store_mib = traced(Path(legacy), "file", peaks)
    return {
        "peak": peak,
        "empty_peak": empty_peak,
        "maxrss_before_kib": before,
        "maxrss_after_kib": maxrss_kib(),
        "hwm_before_kib": hwm["VmHWM"],
        "hwm_after_kib": peaks["VmHWM"],
        "anon_kib": peaks["RssAnon"],
        "file_kib": peaks["RssFile"],
        "identities": report.written.get("identity_to_vuin", 0),
        "store_mib": store_mib,
    }


def measure_memory(legacy: Path, empty: Path, folder: Path, app_id: str) -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1, maxtasksperchild=1) as pool:
        result: dict[str, Any] = pool.apply(
            memory_child, (str(legacy), str(empty), str(folder), app_id))
    return result


# --- output -------------------------------------------------------------------------------


def profile_migration(tmp: Path, legacy: Path, app_id: str) -> Any:
    """A cProfile of one more migration of ``legacy`` into fresh stores."""
    import cProfile

    stores = Stores(tmp / "profile")
    profiler = cProfile.Profile()
    try:
        profiler.runcall(stores.migrate, legacy, app_id)
    finally:
        stores.close()
    return profiler


def print_profile(profiler: Any, legacy: Path) -> None:
    import pstats

    print(f"\n--- cProfile: one more migration of {legacy.name}, by own time ---")
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(22)
    print("--- the same profile: stage functions of migrate/legacy.py, cumulative ---")
    stats.sort_stats("cumulative").print_stats(
        r"legacy\.py:\d+\((migrate_legacy|_file_sha256|_cache_counter|convert|run|"
        r"forward_keys|reverse_keys|pro_keys|reissue|rebuilt_reverse|copy_bucket|verify)\)")


def main() -> int:
    run = Run(__doc__, quick="one timed round and one reader pass instead of 3 (still the "
                             "medium file, still both memory runs)",
              strict="exit 1 if a target is missed",
              profile="also cProfile one more medium migration (not part of the figures)")
    rounds = 1 if run.quick else 3
    summary = load_summary()
    app_id = str(summary.get("settings", {}).get("appid") or DEFAULT_APP_ID)
    failed = False

    with run.temp_dir("migrate-bench-", "migrate",
                      tmpfs_why="the stores' fsyncs would cost nothing") as tmp:
        legacy_dir = tmp / "legacy"
        legacy_dir.mkdir()
        medium = legacy_dir / f"{MEDIUM}.db"
        unpack_s = unpack_medium(summary, medium)
        small = legacy_dir / "small-counter.db"
        empty = legacy_dir / "empty.db"
        shutil.copyfile(TEST_FIXTURES / "small-counter.db", small)
        shutil.copyfile(TEST_FIXTURES / "empty.db", empty)
        medium_size, small_size = medium.stat().st_size, small.stat().st_size
        print(f"legacy files in the temp dir: {medium.name} {mib(medium_size):.1f} MiB "
              f"(unpacked from .xz in {unpack_s:.1f}s, size and sha256 match the summary), "
              f"{small.name} {mib(small_size):.2f} MiB, {empty.name}; AppID {app_id}")

        # Memory first, while this process is small: a child's ru_maxrss starts at this
        # process's peak RSS (Linux keeps it across fork and exec).
        memory = {name: measure_memory(path, empty, tmp / f"mem-{name}", app_id)
                  for name, path in (("small", small), ("medium", medium))}

        # Timed rounds, each into fresh stores, each checked.
        times: list[float] = []
        best: tuple[float, MigrationReport, Stages, float] | None = None
        checks: list[str] = []
        for r in range(rounds):
            stores = Stores(tmp / f"round-{r}")
            try:
                stages = Stages()
                gc.collect()
                stages.t0 = t = time.perf_counter()
                report = stores.migrate(medium, app_id, progress=stages)
                elapsed = time.perf_counter() - t
                problems = verify_sample(stores, report, summary, app_id)
                store_mib = stores.identity_file_mib()
            finally:
                stores.close()
            times.append(elapsed)
            checks.extend(f"round {r + 1}: {p}" for p in problems)
            if best is None or elapsed < best[0]:
                best = (elapsed, report, stages, store_mib)
        assert best is not None
        seconds, report, stages, store_mib = best

        # The reader alone, same file.
        reader: dict[str, tuple[int, float]] = {}

        def keep(name: str, n: int, secs: float) -> None:
            if name not in reader or secs < reader[name][1]:
                reader[name] = (n, secs)

        with BoltFile(medium) as bolt:
            for _ in range(rounds):
                gc.collect()
                t = time.perf_counter()
                file_sha256(medium)
                keep("sha256 of the file, 1 MiB reads", medium_size, time.perf_counter() - t)
                for bucket in (b"ids", b"cache"):
                    gc.collect()
                    t = time.perf_counter()
                    n = sum(1 for _ in bolt.items((bucket,)))
                    keep(f"BoltFile.items({bucket.decode()}), one pass", n,
                         time.perf_counter() - t)
                gc.collect()
                t = time.perf_counter()
                n = sum(len(page) for page in bolt.pages((b"ids",)))
                keep("BoltFile.pages(ids), one pass", n, time.perf_counter() - t)

        profiler = profile_migration(tmp, medium, app_id) if run.profile else None

    identities = report.written.get("identity_to_vuin", 0)
    ids_read = report.read.get("ids", 0)
    all_read = sum(report.read.values())
    rate = identities / seconds

    print_heading(f"  {'migrate ' + medium.name:<34} {'seconds':>8} {'identities/s':>13} "
                  f"{'ids entries/s':>14} {'all entries/s':>14}")
    print(f"  {f'migrate_legacy, best of {rounds}':<34} {seconds:>8.3f} {rate:>13,.0f} "
          f"{ids_read / seconds:>14,.0f} {all_read / seconds:>14,.0f}   rounds: "
          + ", ".join(f"{t:.3f}" for t in times))
    print("  read " + ", ".join(f"{b} {n:,}" for b, n in report.read.items())
          + "; wrote " + ", ".join(f"{t} {n:,}" for t, n in report.written.items())
          + f"; openid-map.db {store_mib:.1f} MiB")
    print(f"  reported: {len(report.dropped)} dropped, {len(report.conflicts)} conflicts, "
          f"{len(report.reverse_rebuilt)} reverse rebuilt, {len(report.aliases)} aliases, "
          f"{len(report.normalised)} normalised")

    print_heading(f"  {'stages of the best round (progress calls)':<44} {'seconds':>8} "
                  f"{'share':>6}")
    prev = 0.0
    for label, at in [*stages.marks, ("end of the call", seconds)]:
        note = STAGE_NOTES.get(label.split("'")[1] if "'" in label else label, "")
        print(f"  {'… → ' + label:<44} {at - prev:>8.3f} {(at - prev) / seconds:>6.0%}  {note}")
        prev = at

    print_heading(f"  {'reader alone, same file (best of ' + str(rounds) + ')':<40} "
                  f"{'entries':>10} {'seconds':>8} {'entries/s':>11}")
    for name, (n, secs) in reader.items():
        unit = f"{mib(n):>6.1f} MiB" if name.startswith("sha256") else f"{n:>10,}"
        speed = (f"{mib(n) / secs:>7.0f} MiB/s" if name.startswith("sha256")
                 else f"{n / secs:>11,.0f}")
        print(f"  {name:<40} {unit} {secs:>8.3f} {speed}")

    sample_n = len(summary["ids"]["forward_sample"])
    print()
    if checks:
        failed = True
        print(f"verification FAILED ({sample_n:,} sampled mappings, counts, counters, marker):")
        for line in checks:
            print(f"  {line}")
    else:
        print(f"verification OK, every round: {sample_n:,}/{sample_n:,} sampled mappings have "
              f"their legacy row as vUIN; identity_to_vuin {summary['ids']['forward_count']:,} "
              f"= forward ids; vuin_counter >= currentRow {summary['ids']['current_row']:,}; "
              f"msgid counter = cache currentRow {summary['cache']['current_row']:,}; marker "
              "present")

    print_heading(f"  {'memory, fresh process per file':<30} {'file MiB':>8} "
                  f"{'identities':>10} {'traced peak':>12} {'above empty':>12} "
                  f"{'ru_maxrss before→after':>22} {'VmHWM before→after':>20} {'RssAnon':>7} "
                  f"{'RssFile':>7}")
    for name, size, path in (("small", small_size, small), ("medium", medium_size, medium)):
        m = memory[name]
        above = m["peak"] - m["empty_peak"]
        print(f"  {path.name:<30} {mib(size):>8.2f} {m['identities']:>10,} "
              f"{mib(m['peak']):>8.2f} MiB {mib(above):>8.2f} MiB "
              f"{m['maxrss_before_kib'] / 1024:>10.1f} → {m['maxrss_after_kib'] / 1024:>5.1f} MiB "
              f"{m['hwm_before_kib'] / 1024:>8.1f} → {m['hwm_after_kib'] / 1024:>5.1f} MiB "
              f"{m['anon_kib'] / 1024:>7.1f} {m['file_kib'] / 1024:>7.1f}")
    empty_peak = memory["medium"]["empty_peak"]
    print(f"  empty.db (the fixed cost): traced peak {mib(empty_peak):.2f} MiB. openid-map.db "
          f"written: {memory['small']['store_mib']:.2f} and {memory['medium']['store_mib']:.1f} "
          "MiB. RssAnon / RssFile: MiB, highest sampled at the progress calls and after.\n"
          "  ru_maxrss carries this process's peak at fork into the child (Linux keeps it "
          "across exec); VmHWM is the child's own peak RSS.")
    size_ratio = medium_size / small_size
    mem_ratio = memory["medium"]["peak"] / memory["small"]["peak"]
    small_above = memory["small"]["peak"] - memory["small"]["empty_peak"]
    medium_above = memory["medium"]["peak"] - memory["medium"]["empty_peak"]
    above_ratio = medium_above / small_above if small_above > 0 else float("nan")
    rss_growth = [(memory[n]["hwm_after_kib"] - memory[n]["hwm_before_kib"]) / 1024
                  for n in ("small", "medium")]
    limit = MEMORY_SHARE * size_ratio

    print(f"\n  file size ratio medium/small {size_ratio:.1f}x; traced peak ratio "
          f"{mem_ratio:.2f}x (above empty.db: {above_ratio:.1f}x); peak RSS (VmHWM) grew "
          f"{rss_growth[0]:.1f} and {rss_growth[1]:.1f} MiB during the migration")
    print(f"  memory: traced peak ratio {mem_ratio:.2f}x   target < {MEMORY_SHARE:g} x size "
          f"ratio = {limit:.1f}x  {run.verdict_below(mem_ratio, limit)}")
    print(f"  throughput: {rate:,.0f} identities/s   target >= {IDENTITY_TARGET:,.0f}  "
          f"{run.verdict(rate, IDENTITY_TARGET)}")

    if profiler is not None:
        print_profile(profiler, medium)

    print(f"\npeak RSS of this process {run.peak_rss_mib():.1f} MiB (timed rounds and reader "
          "passes; the memory runs had their own processes)")
    print(f"{run.summary()} (other processes skew the figures)")
    return 1 if failed else run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
