"""A switch onto a MirrorMaker 2 copy while a Python reader is killed -9 in a loop:
every record of the source is in the output once, in order per partition, compared
by content (offsets differ across the mirror)."""

from __future__ import annotations

import time

from conftest import create_topic, produce, unique, write_yaml
from test_crash import kill_loop

ALIAS = "mm2p"


def layout(clusters, topic, with_source):
    streams = {"west": {"topics": [f"{ALIAS}.{topic}"],
                        "mirrorOf": {"cluster": "east", "translate": "mm2", "alias": ALIAS}}}
    if with_source:
        streams["east"] = {"topics": [topic]}
    return {"clusters": {n: {"bootstrapServers": clusters[n]} for n in ("east", "west")},
            "streams": {"orders": {"clusters": streams}}}


def test_kill_9_around_a_switch_onto_a_mirror_is_exact(kafka, clusters, tmp_path):
    topic = unique("mirrored")
    create_topic(clusters["east"], topic, 2)
    produce(clusters["east"], topic, [f"m-{i}".encode() for i in range(1000)])
    kafka.command(f"mirror east west {topic} {ALIAS}")
    meta = tmp_path / "streams.yaml"
    write_yaml(meta, layout(clusters, topic, True))

    def during(kill):
        if kill == 2:
            # The switch while a run reads: the source leaves, the copy stays.
            produce(clusters["east"], topic, [f"m-{i}".encode() for i in range(1000, 2000)])
            write_yaml(meta, layout(clusters, topic, False))
            time.sleep(0.5)

    # The run that sees the switch is the third and must be killed; one after it may
    # read what is left before its kill comes (a mirror that keeps up, a fast run).
    lines = kill_loop(
        tmp_path, meta, 2000, 5, seed=11, window=(0.1, 0.5), during=during, at_least=3
    )
    values = [l[3] for l in lines]
    assert len(values) == len(set(values)) == 2000, "each record exactly once"
    assert set(values) == {f"m-{i}" for i in range(2000)}
    assert {l[0] for l in lines} == {"east", "west"}, "read from both sides of the switch"
    last = {}
    for _, partition, _, value in lines:
        i = int(value.split("-")[1])
        assert last.get(partition, -1) < i, "in order per partition across the switch"
        last[partition] = i
