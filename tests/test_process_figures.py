"""process_figures.py: this process's figures, read from what the system keeps."""

from __future__ import annotations

from pathlib import Path

from gensokyo_idmap.process_figures import resident_parts


def test_the_resident_memory_is_read_apart_anonymous_and_file_backed(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython\nVmRSS:\t  61000 kB\nRssAnon:\t   40000 kB\n"
                      "RssFile:\t   20000 kB\nRssShmem:\t    1000 kB\n")
    assert resident_parts(str(status)) == (40000 * 1024, 20000 * 1024)
    assert resident_parts(str(tmp_path / "none")) == (None, None)
    anon, file = resident_parts()  # this process (Linux)
    assert anon is None or (anon > 0 and file is not None and file > 0)
