"""Run many ``gensokyo-idmap`` commands, each in a process of its own, for the fault tests.

Started once as a real subprocess by the tests (``python command_runner.py``), with a JSON
list of jobs on stdin: ``{"id", "args", "cwd", "stop_on"?}``. It imports the CLI once, then
forks a child per job that runs ``main(args)`` with stdout and stderr in files, so a job
costs a fork, not an interpreter start; a job that dies by a signal takes only its child
with it. A job with ``stop_on`` (``serve``) is sent SIGTERM once that text shows in its
stderr. Answers one JSON line: ``{id: {"returncode", "stdout", "stderr"}}``, a negative
return code being the signal that ended the child (as :mod:`subprocess` reports it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import gensokyo_idmap.app  # noqa: F401 - imported once here, not in every serve child
import migrate.legacy  # noqa: F401
from gensokyo_idmap.cli import main

#: Longest a job may run (a serve job: until its stop_on line, then its stop).
JOB_SECONDS = 30.0


def _child(job: dict[str, Any], out: int, err: int) -> None:
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(job["cwd"])
    code = 0
    try:
        main(job["args"], prog_name="gensokyo-idmap")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the test sees the traceback and code 70
        traceback.print_exc()
        code = 70
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _wait(pid: int, err_path: Path, stop_on: str | None) -> int:
    deadline = time.monotonic() + JOB_SECONDS
    stopped = False
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return -999  # hung: the test fails with the stderr so far
        if stop_on is not None and not stopped and stop_on in err_path.read_text("utf-8",
                                                                                "replace"):
            os.kill(pid, signal.SIGTERM)
            stopped = True
        time.sleep(0.01)


def run(job: dict[str, Any], scratch: Path) -> dict[str, Any]:
    out_path = scratch / f"{job['id']}.out"
    err_path = scratch / f"{job['id']}.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        pid = os.fork()
        if pid == 0:
            _child(job, out.fileno(), err.fileno())
        returncode = _wait(pid, err_path, job.get("stop_on"))
    return {"returncode": returncode,
            "stdout": out_path.read_text("utf-8", "replace"),
            "stderr": err_path.read_text("utf-8", "replace")}


def main_runner() -> None:
    jobs = json.loads(sys.stdin.read())
    with tempfile.TemporaryDirectory() as tmp:
        results = {job["id"]: run(job, Path(tmp)) for job in jobs}
    sys.stdout.write(json.dumps(results) + "\n")


if __name__ == "__main__":
    main_runner()
