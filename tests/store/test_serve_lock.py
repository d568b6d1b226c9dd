"""store/serve_lock: one serve per data dir, by an OS lock the kernel drops with its holder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from gensokyo_idmap.errors import DataDirInUseError, StoreError
from gensokyo_idmap.store.serve_lock import LOCK_NAME, ServeLock

TIMEOUT = 30

#: A process that takes the lock, says so, and holds it until killed.
HOLDER = """
import sys, time
from pathlib import Path
from gensokyo_idmap.store.serve_lock import ServeLock
ServeLock(Path(sys.argv[1])).acquire()
print("locked", flush=True)
time.sleep(600)
"""


def test_a_second_lock_is_refused_naming_the_data_dir_and_the_holder(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with ServeLock(data_dir):
        assert (data_dir / LOCK_NAME).read_text() == f"{os.getpid()}\n"
        with pytest.raises(DataDirInUseError) as refused:
            ServeLock(data_dir).acquire()
        assert str(data_dir) in refused.value.message
        assert f"pid {os.getpid()}" in refused.value.message
    with ServeLock(data_dir):  # released: taken again
        pass


def test_the_kernel_drops_the_lock_of_a_killed_holder(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data_dir)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(DataDirInUseError, match=f"pid {holder.pid}"):
            ServeLock(data_dir).acquire()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=TIMEOUT)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=TIMEOUT)
        assert holder.stdout is not None
        holder.stdout.close()
    with ServeLock(data_dir):  # nothing to clean up after a kill -9
        assert (data_dir / LOCK_NAME).read_text() == f"{os.getpid()}\n"


def test_a_data_dir_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    with pytest.raises(StoreError) as failed:
        ServeLock(blocker).acquire()
    assert str(blocker) in failed.value.message
    assert not isinstance(failed.value, DataDirInUseError)
