"""launch: the console script's entry point refuses Windows in one line, before anything
imports fcntl."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from gensokyo_idmap.launch import unsupported_platform

ROOT = Path(__file__).resolve().parent.parent


def test_only_windows_is_refused() -> None:
    assert unsupported_platform("linux") is None
    assert unsupported_platform("darwin") is None
    assert unsupported_platform("cygwin") is None  # Cygwin's Python has fcntl
    reason = unsupported_platform("win32")
    assert reason is not None and "Windows" in reason and "fcntl" in reason


def test_the_console_script_refuses_windows_in_one_line(tmp_path: Path) -> None:
    """The entry point pyproject.toml installs, run as on Windows: sys.platform says win32
    and fcntl cannot be imported. It must say why in one line, not end in a traceback."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["scripts"]
    module, _, function = scripts["gensokyo-idmap"].partition(":")
    code = ("import sys; sys.platform = 'win32'; sys.modules['fcntl'] = None\n"
            f"import {module}\n{module}.{function}()")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    done = subprocess.run([sys.executable, "-c", code, "--version"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert done.returncode == 1, done
    assert "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: gensokyo-idmap runs on Linux"), done.stderr
    assert "Windows" in done.stderr and done.stdout == ""
