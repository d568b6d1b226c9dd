"""The platform side of de-duplication: how long a delivery is remembered follows the
webhook's limits."""

import pytest

from gensokyo_idmap.bridge.dedup import window_seconds


@pytest.mark.parametrize(("max_age", "window"), [(600, 660), (1, 300), (3600, 3660)])
def test_the_window_covers_every_replay_the_webhook_accepts(max_age: int, window: int) -> None:
    """A callback first received at t may be dated up to the skew (60 s) ahead and is taken
    until that date is max_age old: the window is that long, and never under 300 s."""
    assert window_seconds(max_age) == window
