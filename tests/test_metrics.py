"""metrics: the hot-path counters render as Prometheus counters, like prometheus-client's."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from gensokyo_idmap.metrics import HotCounter


def test_hot_counter_renders_each_label_set_as_a_total() -> None:
    registry = CollectorRegistry(auto_describe=True)
    counter = HotCounter("test_things", "Things counted", ["kind"], registry=registry)
    counter.labels("a").inc()
    counter.labels("a").inc(2)
    counter.labels("b").inc()
    text = generate_latest(registry).decode()
    assert "# TYPE test_things_total counter" in text  # as prometheus-client writes it
    assert 'test_things_total{kind="a"} 3.0' in text
    assert 'test_things_total{kind="b"} 1.0' in text


def test_hot_counter_children_are_shared_per_label_set() -> None:
    counter = HotCounter("test_shared", "Shared", ["kind"], registry=CollectorRegistry())
    assert counter.labels("x") is counter.labels("x")
    assert counter.labels("x") is not counter.labels("y")


def test_hot_counter_refuses_the_wrong_number_of_labels() -> None:
    counter = HotCounter("test_labels", "Labels", ["a", "b"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match="test_labels"):
        counter.labels("only-one")
