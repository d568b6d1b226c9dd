"""API benchmark: ``/getid?type=1`` on known ids through the daemon, beside a bare aiohttp
handler returning a constant.

Run: ``.venv/bin/python bench/api.py [--quick] [--strict]``

This is a benchmark script, not a test. The exit code is 0 unless ``--strict`` is given and a
target is missed.

What runs
---------
daemon (a subprocess)
    ``gensokyo-idmap serve`` with only the API listener (``api.listen``), both stores in the
    temp dir, ``log.level: info`` as shipped. 1 000 ids are stored first (type=1, untimed);
    the timed requests then hit known ids: the read-only resolve hot path.
bare (a subprocess)
    An aiohttp application with one ``GET /getid`` handler answering ``{"row": 1}``: the
    ceiling of aiohttp on this machine, same access-log setting (off).
client (this process)
    One aiohttp session, N requests in flight (N = 1 and 32), plain GETs as a lotus client
    sends them.

Figures: requests/s for each, best of 3 passes, and the ratio daemon / bare.
Target: ratio >= 0.5 at 32 in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import yaml
from _common import Result, Run, Table
from aiohttp import ClientSession, ClientTimeout, TCPConnector

SCRIPT = Path(sys.executable).parent / "gensokyo-idmap"
BARE = """
import sys
from aiohttp import web
async def handle(request):
    return web.json_response({"row": 1})
app = web.Application()
app.add_routes([web.get("/getid", handle)])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def wait_up(session: ClientSession, url: str, child: subprocess.Popen[bytes]) -> None:
    for _ in range(400):
        if child.poll() is not None:
            raise SystemExit(f"server exited {child.returncode}")
        try:
            async with session.get(url) as resp:
                if resp.status < 500:
                    return
        except OSError:
            pass
        await asyncio.sleep(0.05)
    raise SystemExit(f"{url} never answered")


async def load(session: ClientSession, base: str, ids: list[str], in_flight: int
               ) -> tuple[float, list[int]]:
    """Seconds for one pass over ``ids`` with ``in_flight`` requests outstanding, and each
    request's latency (ns, sorted)."""
    queue = iter(ids)
    lat: list[int] = []
    clock = time.perf_counter_ns

    async def worker() -> None:
        for ident in queue:
            started = clock()
            async with session.get(base + "/getid", params={"type": "1", "id": ident}) as r:
                await r.read()
                if r.status != 200:
                    raise SystemExit(f"{r.status}: {await r.text()}")
            lat.append(clock() - started)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return time.perf_counter() - t0, sorted(lat)


async def measure(run: Run, tmp: Path) -> None:
    n_ids = 1000
    passes = 2 if run.quick else 3
    requests = 1000 if run.quick else 5000
    ids = [f"{i:032X}" for i in range(n_ids)]
    order = [ids[i % n_ids] for i in range(requests)]
    daemon_port, bare_port = free_port(), free_port()
    config = tmp / "config.yml"
    config.write_text(yaml.safe_dump({
        "bot": {"app_id": "102000001"}, "idmap": {"data_dir": str(tmp / "data")},
        "webhook": {"listen": ""}, "onebot": {"reverse_ws": [], "forward_ws": ""},
        "api": {"listen": f"127.0.0.1:{daemon_port}"}, "log": {"level": "info"}}))
    with (tmp / "daemon.log").open("wb") as log:
        daemon = subprocess.Popen([str(SCRIPT), "serve", "--config", str(config)],
                                  stdout=subprocess.DEVNULL, stderr=log)
    bare = subprocess.Popen([sys.executable, "-c", BARE, str(bare_port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    results: dict[tuple[str, int], Result] = {}
    try:
        connector = TCPConnector(limit=0)
        async with ClientSession(connector=connector, timeout=ClientTimeout(total=30)) as s:
            bases = {"daemon": f"http://127.0.0.1:{daemon_port}",
                     "bare": f"http://127.0.0.1:{bare_port}"}
            await wait_up(s, bases["daemon"] + "/healthz", daemon)
            await wait_up(s, bases["bare"] + "/getid", bare)
            await load(s, bases["daemon"], ids, 32)  # store them: known from here on
            for in_flight in (1, 32):
                for name, base in bases.items():
                    result = results.setdefault((name, in_flight), Result(
                        f"{name}: /getid?type=1, {in_flight} in flight"))
                    for _ in range(passes):
                        seconds, lat = await load(s, base, order, in_flight)
                        if result.keep_best(len(order), seconds):
                            result.lat_ns = lat  # the latencies of the pass kept
    finally:
        for child in (daemon, bare):
            child.send_signal(signal.SIGTERM)
            child.wait(20)
    table = Table(name=44, rate=10, us=8)
    table.print_header()
    for result in results.values():
        print(table.row(result))
    print()
    for in_flight in (1, 32):
        ratio = (results[("daemon", in_flight)].ops_per_s
                 / results[("bare", in_flight)].ops_per_s)
        print(f"  daemon / bare, {in_flight:>2} in flight: {ratio:.2f}  target >= 0.5  "
              f"{run.verdict(ratio, 0.5)}")


def main() -> int:
    run = Run(__doc__, quick="fewer requests and passes",
              strict="exit 1 when the target is missed", profile="(unused)")
    with run.temp_dir("gsk-bench-api-", "api", "where fsync is free") as tmp:
        asyncio.run(measure(run, tmp))
    print(f"\n  peak RSS {run.peak_rss_mib():.0f} MiB (client); {run.summary()}; "
          f"{os.cpu_count()} CPUs")
    return run.exit_code()


if __name__ == "__main__":
    sys.exit(main())
