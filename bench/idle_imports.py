"""Idle memory of a default daemon, and what each module it imports costs (issue 36.2).

Run: ``.venv/bin/python bench/idle_imports.py [--quick] [--strict] [--against REF]
[--rounds N] [--config PATH]``.

This is a benchmark script, not a test: it prints figures, and its exit code is 0 unless
``--strict`` is given and the target is missed.

What runs
---------
idle daemon
    ``gensokyo-idmap serve --config examples/config.yml`` (the console script, as an
    operator starts it), its modules compiled to bytecode first (as an installed
    package has them: :func:`compile_bytecode`), its ``data_dir`` a new directory in the
    temp dir each round, its listeners (webhook, identity API and console, forward WS) and
    the reverse WS it dials on free loopback ports (``GSK_*`` variables over the file;
    the framework it dials is not there, as on a first start). Nothing talks to it. From
    8 s after its start (the ready line came first) ``VmRSS``, ``RssAnon`` and ``RssFile``
    of ``/proc/<pid>/status`` are read once a second, three times; a round's figure is
    the median of its three, the result the median of the rounds (3, 1 with ``--quick``).
``--against REF``
    The same daemon from a git ref of this checkout (``git archive`` into the temp dir, put
    first on ``PYTHONPATH`` in place of this tree), its rounds alternating with this tree's
    in the same run: the figures before and after a change, on the same machine and load.
several per host
    Without ``--quick``, three idle daemons of this tree at once (each its own data dir and
    ports): per daemon ``VmRSS``, its proportional share ``Pss`` (a page mapped by k
    processes counts 1/k in each: the libraries, Python itself) and what it alone holds
    (``USS``: ``Private_Clean`` + ``Private_Dirty``), from ``/proc/<pid>/smaps_rollup``
    8 s after the last one started. The sum of the ``Pss`` is what they cost the host.
import cost
    This tree's daemon once more under ``python -X importtime``, to its ready line: the
    modules it imported. Per top-level package (third-party and the standard library's
    largest), its cumulative import time in that run (ms: the sum over each place it was
    entered from another package; a package that imports another counts it too), and the
    memory it adds: a fresh interpreter that has imported ``asyncio`` and ``aiohttp.web``
    (the base of any aiohttp relay) imports every module of that package the daemon
    imported (so what a package loads only when first used counts too, but not what the
    daemon then builds with it) and reports the difference of ``VmRSS``, ``RssAnon`` and
    ``RssFile`` (median of three). The daemon's own modules are measured over all of
    those packages. The optional packages a default daemon must not load are listed with
    what each would add to it (over every module the daemon imported).

Target
------
``VmRSS`` of the idle daemon at most 55 MiB (issue 36.2; Python with aiohttp alone is about
36 MiB here: the base line of the import table).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from _common import die_with_parent, print_heading, proc_status, unpack_ref

from gensokyo_idmap.launch import UNUSED_EXTRAS
from gensokyo_idmap.testing import free_port

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
EXAMPLE = ROOT / "examples" / "config.yml"
TARGET_MIB = 55.0
START_TIMEOUT = 60.0
FIRST_SAMPLE_SECONDS = 8.0
SAMPLES = 3
#: Idle daemons started at once for the side-by-side figures (several per host).
SIDE_BY_SIDE = 3
FIELDS = ("VmRSS", "RssAnon", "RssFile")
#: Imported first by every fresh interpreter that measures one package: what any aiohttp
#: daemon holds anyway.
BASE = ("asyncio", "aiohttp.web")
#: Packages a default daemon (examples/config.yml) has no use for, each with the module
#: that stands for it: the console's pages and templates (until a page is opened), the
#: CLI's other commands (until one is run: the largest stands for them), metrics (until a
#: scrape), the backends it is not configured with, the webhook's signatures (no secret),
#: structlog's optional extras (a halted import is a line of ``-X importtime`` too, so a
#: submodule only a real import brings stands for each), the test kit's.
OPTIONAL = {
    "console pages": "gensokyo_idmap.api.console.pages", "cli.ops": "gensokyo_idmap.cli.ops",
    "jinja2": "jinja2", "markupsafe": "markupsafe", "prometheus_client": "prometheus_client",
    "psycopg": "psycopg", "psycopg_pool": "psycopg_pool", "redis": "redis.asyncio",
    "nacl.signing": "nacl.signing", "cryptography": "cryptography.hazmat.primitives",
    "rich": "rich.traceback", "pygments": "pygments.lexers", "greenlet": "greenlet._greenlet",
    "hypothesis": "hypothesis", "migrate.legacy": "migrate.legacy",
}
#: Standard library packages listed beside the third-party ones (the largest).
STDLIB_LISTED = ("asyncio", "ssl", "email", "importlib", "http", "urllib", "xml", "json",
                 "zipfile", "argparse", "decimal", "ctypes", "logging")

# --- one daemon ----------------------------------------------------------------------------


@dataclass
class Tree:
    """The code a daemon runs: this checkout, or a git ref of it unpacked."""

    name: str
    path: Path

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(self.path), *filter(None, [os.environ.get("PYTHONPATH")])])}


def unpack(ref: str, into: Path) -> Tree:
    """``ref`` of this checkout as files under ``into``."""
    return Tree(f"{ref}", unpack_ref(ref, into))


def compile_bytecode(tree: Tree) -> None:
    """The tree's modules compiled to bytecode (``__pycache__``, ignored by git), as pip
    compiles an installed package's. Without it a daemon compiles every module it imports
    from source at each start: an unpacked ref always (no ``.pyc``), a checkout whose
    files changed under ``PYTHONDONTWRITEBYTECODE`` (which the test environment sets). The
    compiler's garbage stays in the heap until the first trim, and was measured here as
    1.8 MiB of main's idle figure: not the daemon an operator runs, and not the same for
    both trees."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree.path / "gensokyo_idmap"),
                    str(tree.path / "migrate")], check=True, stdout=subprocess.DEVNULL,
                   env=tree.env(), timeout=300)


def serve_command(extra: list[str]) -> list[str]:
    exe = Path(sys.executable).with_name("gensokyo-idmap")
    if exe.exists() and not extra:
        return [str(exe)]
    return [sys.executable, *extra, "-c", "from gensokyo_idmap.launch import main; main()"]


def start(tree: Tree, work: Path, config: Path, log_path: Path,
          python_flags: list[str] | None = None) -> subprocess.Popen[bytes]:
    """A daemon of ``tree`` on a new data dir under ``work``, its listeners on free ports;
    returns once its ready line is in ``log_path``."""
    env = tree.env()
    env.update({
        "GSK_IDMAP__DATA_DIR": str(work / "data"),
        "GSK_WEBHOOK__LISTEN": f"127.0.0.1:{free_port()}",
        "GSK_API__LISTEN": f"127.0.0.1:{free_port()}",
        "GSK_ONEBOT__FORWARD_WS": f"127.0.0.1:{free_port()}",
        "GSK_ONEBOT__REVERSE_WS": f"[ws://127.0.0.1:{free_port()}/onebot/v11/ws]",
    })
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([*serve_command(python_flags or []), "serve", "--config",
                                 str(config)], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=work, env=env,
                                preexec_fn=die_with_parent)
    deadline = time.monotonic() + START_TIMEOUT
    while b"[app] ready" not in log_path.read_bytes():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            tail = log_path.read_text(errors="replace")[-2000:]
            raise SystemExit(f"the daemon of {tree.name} did not start; its log ends:\n{tail}")
        time.sleep(0.05)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def idle_round(tree: Tree, tmp: Path, n: int, config: Path) -> dict[str, float]:
    """One daemon of ``tree`` left idle: the median of its samples (MiB per field)."""
    work = tmp / f"{tree.path.name}-{n}"
    work.mkdir()
    started = time.monotonic()
    proc = start(tree, work, config, work / "daemon.log")
    samples: list[dict[str, int]] = []
    try:
        for k in range(SAMPLES):
            time.sleep(max(0.0, started + FIRST_SAMPLE_SECONDS + k - time.monotonic()))
            samples.append(proc_status(proc.pid))
    finally:
        stop(proc)
        shutil.rmtree(work, ignore_errors=True)
    return {name: statistics.median(s[name] for s in samples) / 1024 for name in FIELDS}


def rollup(pid: int) -> dict[str, int]:
    """The kB figures of /proc/<pid>/smaps_rollup (``Rss``, ``Pss``, ``Private_Dirty`` …)."""
    out: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, _, value = line.partition(":")
        parts = value.split()
        if len(parts) == 2 and parts[1] == "kB":
            out[name] = int(parts[0])
    return out


def side_by_side(tree: Tree, tmp: Path, config: Path, count: int) -> list[dict[str, float]]:
    """``count`` idle daemons of ``tree`` at once, each on its own data dir: per daemon
    (MiB), ``VmRSS``; its proportional share ``Pss`` (a page mapped by k processes counts
    1/k in each: the libraries' code, Python's own); what it alone holds ``USS``
    (``Private_Clean`` + ``Private_Dirty``). What several daemons on one host cost is the
    sum of their ``Pss``, less than the sum of their ``VmRSS``."""
    procs = []
    try:
        for n in range(count):
            work = tmp / f"pair-{n}"
            work.mkdir()
            procs.append(start(tree, work, config, work / "daemon.log"))
        time.sleep(FIRST_SAMPLE_SECONDS)
        figures = []
        for proc in procs:
            r = rollup(proc.pid)
            figures.append({"VmRSS": r["Rss"] / 1024, "Pss": r["Pss"] / 1024,
                            "USS": (r["Private_Clean"] + r["Private_Dirty"]) / 1024})
        return figures
    finally:
        for proc in procs:
            stop(proc)

# --- import cost ---------------------------------------------------------------------------


@dataclass
class Row:
    self_us: int
    cumulative_us: int
    depth: int
    name: str


def imported_by_daemon(tree: Tree, tmp: Path, config: Path) -> list[Row]:
    """The modules a daemon of ``tree`` imports up to its ready line, as ``-X importtime``
    writes them (children before their parent)."""
    work = tmp / "importtime"
    work.mkdir()
    log = work / "daemon.log"
    proc = start(tree, work, config, log, ["-X", "importtime"])
    stop(proc)
    rows = []
    text = log.read_text(errors="replace")
    for line in text[:text.index("[app] ready")].splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( +)(\S+)$", line)
        if match:
            rows.append(Row(int(match[1]), int(match[2]), (len(match[3]) - 1) // 2,
                            match[4]))
    shutil.rmtree(work, ignore_errors=True)
    return rows


def package_of(module: str) -> str:
    return module.split(".")[0]


def cumulative_by_package(rows: list[Row]) -> dict[str, int]:
    """Per top-level package, the cumulative time of every import of it entered from
    another package (its first import, and any submodule imported later from outside)."""
    totals: dict[str, int] = {}
    for i, row in enumerate(rows):
        parent = next((later.name for later in rows[i + 1:] if later.depth < row.depth), None)
        top = package_of(row.name)
        if parent is None or package_of(parent) != top:
            totals[top] = totals.get(top, 0) + row.cumulative_us
    return totals


MEASURE = """
import sys
before_names, measured = sys.argv[1].split(","), sys.argv[2].split(",")
EXTRAS = ("rich", "greenlet", "better_exceptions")
for name in EXTRAS:  # kept out, as the daemon's entry point does
    sys.modules.setdefault(name, None)
def status():
    out = {}
    for line in open("/proc/self/status"):
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon", "RssFile"):
            out[name] = int(value.split()[0])
    return out
def load(names):
    done = 0
    for name in names:
        try:
            __import__(name)
            done += 1
        except Exception:  # a library's optional import that fails here as in the daemon
            pass
    return done
load(before_names)
for name in EXTRAS:  # unless measured
    if any(module.split(".")[0] == name for module in measured) and name in sys.modules \
            and sys.modules[name] is None:
        del sys.modules[name]
present = measured[0] in sys.modules
before = status()
done = load(measured)
after = status()
print(done, int(present), *(after[k] - before[k] for k in ("VmRSS", "RssAnon", "RssFile")))
"""


@dataclass
class Added:
    """What importing some modules added to a fresh interpreter (MiB, median of three)."""

    vm: float
    anon: float
    file: float
    #: the (first) module was imported already by what came before (its figures are 0)
    before: bool

    def columns(self) -> str:
        if self.before:
            return "   (in the base line)"
        return f"{self.vm:>7.2f} {self.anon:>6.2f} {self.file:>6.2f}"


def memory_added(modules: list[str], tree: Tree, before: tuple[str, ...] = BASE
                 ) -> Added | None:
    """What importing ``modules`` adds to a fresh interpreter that imported ``before``;
    None when none of them can be imported here."""
    runs = []
    for _ in range(3):
        done = subprocess.run([sys.executable, "-c", MEASURE, ",".join(before),
                               ",".join(modules)], capture_output=True, text=True,
                              env=tree.env(), timeout=120)
        if done.returncode:
            raise SystemExit(f"measuring {modules[0]} failed:\n{done.stderr[-2000:]}")
        loaded, present, *figures = (int(v) for v in done.stdout.split())
        if not loaded:
            return None
        runs.append(figures)
    vm, anon, file = (statistics.median(run[k] for run in runs) / 1024 for k in range(3))
    return Added(vm, anon, file, bool(present))


def base_line(tree: Tree) -> dict[str, float]:
    """VmRSS / RssAnon / RssFile (MiB) of a fresh interpreter once it imported BASE."""
    code = ("import asyncio, aiohttp.web\nfor line in open('/proc/self/status'):\n"
            "    name, _, value = line.partition(':')\n"
            "    if name in ('VmRSS', 'RssAnon', 'RssFile'): print(name, value.split()[0])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=tree.env(), check=True, timeout=120)
    return {name: int(value) / 1024 for name, value in
            (line.split() for line in done.stdout.splitlines())}


def print_imports(tree: Tree, tmp: Path, config: Path) -> None:
    rows = imported_by_daemon(tree, tmp, config)
    order = list(dict.fromkeys(row.name for row in reversed(rows)))  # parents first
    loaded = set(order)
    totals = cumulative_by_package(rows)
    ours = ("gensokyo_idmap", "migrate")
    by_package: dict[str, list[str]] = {}
    for name in order:
        by_package.setdefault(package_of(name), []).append(name)
    third_party = sorted(
        (top for top in totals
         if top not in sys.stdlib_module_names and top not in ours
         and not top.startswith("_") and top not in UNUSED_EXTRAS),
        key=lambda top: -totals[top])
    stdlib = [top for top in STDLIB_LISTED if top in totals]
    base = base_line(tree)
    print_heading(f"  {'package':<24} {'import ms':>9} {'+VmRSS':>7} {'+anon':>6} "
                  f"{'+file':>6}  (MiB over {' + '.join(BASE)}: "
                  f"{base['VmRSS']:.1f} VmRSS, {base['RssAnon']:.1f} anon)")
    for top in [*third_party, *stdlib]:
        added = memory_added(by_package[top], tree)
        if added is not None:  # else only a library's optional import that failed
            print(f"  {top:<24} {totals[top] / 1000:>9.1f} {added.columns()}")
    modules = [name for top in ours for name in by_package.get(top, [])]
    others = tuple(name for name in order if package_of(name) in third_party)
    added = memory_added(modules, tree, (*BASE, *others))
    assert added is not None
    print(f"  {'gensokyo_idmap, migrate':<24} "
          f"{sum(totals.get(top, 0) for top in ours) / 1000:>9.1f} {added.columns()}"
          f"  ({len(modules)} modules, over the packages above)")
    print_heading(f"  {'not for a default daemon':<24} {'loaded':>9} {'+VmRSS':>7} "
                  f"{'+anon':>6} {'+file':>6}")
    for name, module in OPTIONAL.items():
        added = memory_added([module], tree, (*BASE, *order))
        shown = "   not installed" if added is None else added.columns()
        print(f"  {name:<24} {'YES' if module in loaded else 'no':>9} {shown}")
    print(f"\n  {len(loaded)} modules imported by the daemon of {tree.name}")

# --- the run -------------------------------------------------------------------------------


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="one round each, no side-by-side and no import table")
    ap.add_argument("--strict", action="store_true", help="exit 1 if the target is missed")
    ap.add_argument("--against", metavar="REF",
                    help="also run the daemon of this git ref, alternating (before/after)")
    ap.add_argument("--rounds", type=int, default=None, help="daemons started per tree")
    ap.add_argument("--config", type=Path, default=EXAMPLE,
                    help="the config file (default: examples/config.yml)")
    args = ap.parse_args()
    rounds = args.rounds or (1 if args.quick else 3)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gsk-idle-") as name:
        tmp = Path(name)
        here = Tree("this tree", ROOT)
        trees = [unpack(args.against, tmp / "against"), here] if args.against else [here]
        for tree in trees:
            compile_bytecode(tree)
        print(f"gensokyo-idmap idle memory benchmark: python {platform.python_version()}, "
              f"{os.cpu_count()} CPUs, {args.config.name}, {rounds} round(s) per tree")
        figures: dict[str, list[dict[str, float]]] = {tree.name: [] for tree in trees}
        for n in range(rounds):
            for tree in trees:
                figures[tree.name].append(idle_round(tree, tmp, n, args.config.resolve()))
        print_heading(f"  {'idle daemon, MiB':<24} {'VmRSS':>7} {'RssAnon':>8} "
                      f"{'RssFile':>8}   rounds (VmRSS)")
        medians = {}
        for tree in trees:
            runs = figures[tree.name]
            medians[tree.name] = {f: statistics.median(run[f] for run in runs) for f in FIELDS}
            m = medians[tree.name]
            print(f"  {tree.name:<24} {m['VmRSS']:>7.1f} {m['RssAnon']:>8.1f} "
                  f"{m['RssFile']:>8.1f}   " + " ".join(f"{run['VmRSS']:.1f}" for run in runs))
        if args.against:
            before, after = medians[trees[0].name], medians[here.name]
            print(f"  {'change':<24} " + " ".join(
                f"{after[f] - before[f]:>+{w}.1f}" for f, w in zip(FIELDS, (7, 8, 8), strict=True)))
        vm = medians[here.name]["VmRSS"]
        verdict = "PASS" if vm <= TARGET_MIB else "MISS"
        print(f"  target: VmRSS <= {TARGET_MIB:.0f} MiB: {vm:.1f} {verdict}")
        if not args.quick:
            several = side_by_side(here, tmp, args.config.resolve(), SIDE_BY_SIDE)
            print_heading(f"  {f'{SIDE_BY_SIDE} daemons at once, MiB':<24} {'VmRSS':>7} "
                          f"{'Pss':>8} {'USS':>8}")
            for n, fig in enumerate(several, 1):
                print(f"  {f'daemon {n}':<24} {fig['VmRSS']:>7.1f} {fig['Pss']:>8.1f} "
                      f"{fig['USS']:>8.1f}")
            print(f"  {'host, all of them':<24} {sum(f['VmRSS'] for f in several):>7.1f} "
                  f"{sum(f['Pss'] for f in several):>8.1f}   (the sum of Pss is what "
                  "they cost the host)")
            print_imports(here, tmp, args.config.resolve())
    print(f"\ntotal {time.monotonic() - started:.0f}s; load average {os.getloadavg()[0]:.2f}")
    return 1 if args.strict and verdict == "MISS" else 0


if __name__ == "__main__":
    sys.exit(main())
