"""A map that cannot grow is an error the store remembers, never a dead process.

LMDB unmaps the old map before it maps the bigger one; when that mmap fails it is left with
no map, and the next read is a SIGSEGV. The store probes the address space first. A child
process caps its own address space (RLIMIT_AS) a few MiB above what it uses, fills a store
until the map cannot double, and reports: the write failed with a StoreError, health() says
why, the store still reads; once the cap is lifted the next write grows the map and goes
through, and health() is clear again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import json, resource, sys
from gensokyo_idmap.errors import StoreError
from gensokyo_idmap.store.lmdb.identity import LmdbIdentityStore

def address_space():
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith("VmSize:"))
    return int(line.split()[1]) * 1024

store = LmdbIdentityStore(sys.argv[1], map_size=1 << 20)
resource.setrlimit(resource.RLIMIT_AS, (address_space() + (12 << 20), resource.RLIM_INFINITY))
error, written = None, 0
while written < 200_000 and error is None:
    def fill(view, start=written):
        for n in range(start, start + 500):
            view.set_vuin(f"raw:{n:08d}" + "x" * 200, n + 1)
    try:
        store.write_sync(fill)
        written += 500
    except StoreError as exc:
        error = exc.message
health = store.health()
with store.read() as view:
    readable = view.vuin_of("raw:00000000" + "x" * 200)
resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
store.write_sync(lambda view: view.set_vuin("raw:after", 1))
print(json.dumps({"error": error, "health": health, "readable": readable,
                  "written": written, "health_after": store.health()}))
store.close()
'''


def test_a_map_that_cannot_grow_is_an_error_not_a_signal(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path / "openid-map.db")],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    report = json.loads(done.stdout.splitlines()[-1])  # after the log lines
    assert report["written"] > 0
    assert report["error"] is not None and "the map cannot grow" in report["error"]
    assert report["health"].startswith("the map cannot grow to ")
    assert report["readable"] == 1
    assert report["health_after"] is None
