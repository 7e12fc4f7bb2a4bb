"""kill -9 of a Python reader in a loop, restoring each time from the checkpoint it
stored together with its output: every record is in the output exactly once, across
a cluster added to the stream meanwhile."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import time

from conftest import create_topic, metadata, produce, unique, write_yaml

READER = textwrap.dedent(
    """
    import base64, json, os, sys, time
    import multicluster_kafka as mck

    meta, out_path, state_path, total = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    restore, length = None, 0
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
        restore = mck.Checkpoint.from_bytes(base64.b64decode(state["checkpoint"]))
        length = state["length"]
    # The output goes back to what the checkpoint covers.
    out = open(out_path, "r+b" if os.path.exists(out_path) else "wb")
    out.truncate(length)
    out.seek(length)
    out.flush()
    with open(out_path, "rb") as f:
        n = f.read().count(b"\\n")

    def save(stream):
        out.flush()
        os.fsync(out.fileno())
        tmp = state_path + ".tmp"
        with open(tmp, "w") as f:
            data = base64.b64encode(stream.checkpoint().to_bytes()).decode()
            json.dump({"checkpoint": data, "length": out.tell()}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, state_path)

    if n >= total:  # killed after its last save
        print("started", flush=True)
        print("done", n, flush=True)
        sys.exit(0)
    source = mck.Source(meta, streams=["orders"], starting_offsets="earliest", restore=restore)
    with source.open() as stream:
        print("started", flush=True)
        for record in stream:
            line = [record.cluster, record.partition, record.offset, record.value.decode()]
            out.write((json.dumps(line) + "\\n").encode())
            n += 1
            if n % 20 == 0 or n == total:
                save(stream)
            if n == total:
                break
            if n % 10 == 0:
                time.sleep(0.01)
    print("done", n, flush=True)
    """
)


def kill_loop(tmp_path, meta, total, kills, seed, window, during=None, at_least=None):
    """Runs READER over `meta` until it has written `total` records, killing -9 the
    first `kills` runs `window` seconds (uniform) after they start; `during(k)` runs
    once, while run k reads, before its kill. Fails unless `at_least` runs (all
    `kills` unless given) were killed: a run that reads to the end before its kill
    ends the loop. Returns the output's lines."""
    out, state = tmp_path / "out.jsonl", tmp_path / "state.json"
    args = [sys.executable, "-c", READER, str(meta), str(out), str(state), str(total)]
    rng = random.Random(seed)
    done, called = 0, set()
    for _ in range(40):
        proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "started"
        if done < kills:
            time.sleep(rng.uniform(*window))
            if during is not None and done not in called:
                called.add(done)
                during(done)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
                done += 1
                continue
        rest, _ = proc.communicate(timeout=180)
        assert proc.returncode == 0
        if rest.startswith("done"):
            break
    wanted = kills if at_least is None else at_least
    assert done >= wanted, f"{done} runs killed, {wanted} wanted"
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_kill_9_in_a_loop_with_checkpoint_restores_is_exact(clusters, tmp_path):
    topic = unique("crash")
    for name in ("east", "west"):
        create_topic(clusters[name], topic, 3)
        produce(clusters[name], topic, [f"{name}-{i}".encode() for i in range(1500)])
    meta = tmp_path / "streams.yaml"
    write_yaml(meta, metadata(clusters, "orders", {"east": [topic]}))

    def during(kill):
        if kill == 2:  # the stream gains a cluster while a run reads
            write_yaml(meta, metadata(clusters, "orders", {"east": [topic], "west": [topic]}))

    lines = kill_loop(tmp_path, meta, 3000, 6, seed=7, window=(0.05, 0.6), during=during)
    values = [l[3] for l in lines]
    assert len(values) == len(set(values)) == 3000, "each record exactly once"
    assert set(values) == {f"{c}-{i}" for c in ("east", "west") for i in range(1500)}
    last = {}
    for cluster, partition, offset, _ in lines:
        assert last.get((cluster, partition), -1) < offset, "in order per partition"
        last[(cluster, partition)] = offset
