"""Every bad input raises its class under SourceError with one line, never a crash
of the interpreter."""

from __future__ import annotations

import pathlib

import multicluster_kafka as mck
import pytest

from conftest import create_topic, metadata, unique

DEAD = {"clusters": {"gone": {"bootstrapServers": "127.0.0.1:1"}},
        "streams": {"orders": {"clusters": {"gone": {"topics": ["orders"]}}}}}


def one_line(excinfo) -> str:
    message = str(excinfo.value)
    assert message and "\n" not in message, repr(message)
    assert isinstance(excinfo.value, mck.SourceError)
    return message


def test_a_metadata_file_that_is_missing_or_malformed(tmp_path: pathlib.Path):
    with pytest.raises(mck.MetadataError) as e:
        mck.Source(str(tmp_path / "missing.yaml"), streams=["orders"]).open()
    assert "missing.yaml" in one_line(e)
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters:\n  east:\n    bootstrapServers: [\n")
    with pytest.raises(mck.MetadataError) as e:
        mck.Source(bad, streams=["orders"]).open()
    assert "bad.yaml:" in one_line(e)


def test_a_refused_property_in_a_file_is_a_located_config_error(tmp_path: pathlib.Path):
    refused = tmp_path / "refused.yaml"
    refused.write_text(
        "clusters:\n  east:\n    bootstrapServers: 127.0.0.1:1\n"
        "    properties:\n      sasl.password: s3cret-77\n      fetch.max.bytes: lots\n"
        "streams:\n  orders:\n    clusters:\n      east: {topics: [orders]}\n")
    with pytest.raises(mck.ConfigError) as e:
        mck.Source(refused, streams=["orders"]).open()
    message = one_line(e)
    assert f"{refused}:6:7: cluster `east`: property `fetch.max.bytes` refused" in message
    assert "s3cret" not in message and "lots" not in message


def test_a_metadata_dict_with_an_unknown_field_or_cluster():
    with pytest.raises(mck.MetadataError) as e:
        mck.Source({"clusterz": {}}, streams=["orders"])
    assert "clusterz" in one_line(e)
    broken = {"clusters": {}, "streams": {"orders": {"clusters": {"nowhere": {"topics": ["t"]}}}}}
    with pytest.raises(mck.MetadataError) as e:
        mck.Source(broken, streams=["orders"])
    assert "nowhere" in one_line(e)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"starting_offsets": "soonest"}, "starting_offsets"),
        ({"starting_offsets": {"committed": "sometimes"}}, "starting_offsets"),
        ({"starting_offsets": {"offset": "x"}}, "starting_offsets"),
        ({"stopping_offsets": "never"}, "stopping_offsets"),
        ({"properties": {"fetch.backend": "bogus"}}, "fetch.backend"),
        ({"properties": {"fetch.max.bytes": object()}}, "fetch.max.bytes"),
        ({"order": "random"}, "order"),
        ({"scale_out": "3/2"}, "scale_out"),
        ({"startup_timeout": "soon"}, "startup_timeout"),
        ({"starting_offsets": "committed"}, "group"),
        ({"idle_timeout": 3}, "watermarks"),
        ({"streams": "orders"}, "list"),
    ],
)
def test_bad_arguments_raise_config_error(kwargs, words):
    kwargs.setdefault("streams", ["orders"])
    with pytest.raises(mck.ConfigError) as e:
        mck.Source(DEAD, **kwargs)
    assert words in one_line(e)
    assert isinstance(e.value, ValueError)


def test_metadata_of_the_wrong_type_and_no_streams():
    with pytest.raises(mck.ConfigError) as e:
        mck.Source(42, streams=["orders"])
    assert "metadata" in one_line(e)
    with pytest.raises(mck.ConfigError) as e:
        mck.Source(DEAD)
    assert "stream" in one_line(e)


def test_an_unknown_stream_and_an_unreachable_cluster_at_start_up(clusters):
    topic = unique("errors")
    create_topic(clusters["east"], topic, 1)
    meta = metadata(clusters, "orders", {"east": [topic]})
    with pytest.raises(mck.UnknownStreamError) as e:
        with mck.Source(meta, streams=["payments"], stopping_offsets="latest").open() as s:
            list(s)
    assert "payments" in one_line(e)
    source = mck.Source(DEAD, streams=["orders"], stopping_offsets="latest", startup_timeout=2)
    with pytest.raises(mck.UnreachableClusterError) as e:
        with source.open() as s:
            list(s)
    assert "gone" in one_line(e)
    assert e.value.cluster == "gone" and e.value.retriable


def test_a_checkpoint_that_is_not_one():
    with pytest.raises(mck.CheckpointError) as e:
        mck.Checkpoint.from_bytes(b"not a checkpoint")
    one_line(e)
    with pytest.raises(TypeError):
        mck.Source(DEAD, streams=["orders"], restore=b"bytes, not a Checkpoint")


def test_a_closed_stream_refuses_to_read():
    stream = mck.Source(DEAD, streams=["orders"]).open()
    stream.close()
    for use in (lambda: next(stream), stream.checkpoint, lambda: next(iter(stream.batches()))):
        with pytest.raises(mck.ClosedError) as e:
            use()
        one_line(e)


def test_batches_need_at_least_one_record():
    stream = mck.Source(DEAD, streams=["orders"]).open()
    with pytest.raises(mck.ConfigError):
        stream.batches(max_records=0)


def test_a_metadata_service_that_raises_or_answers_nonsense(clusters):
    class Raising(mck.MetadataService):
        def describe(self):
            raise RuntimeError("registry down")

    class Nonsense(mck.MetadataService):
        def describe(self):
            return {"streams": 7}

    for service, cls, words in ((Raising(), mck.MetadataError, "registry down"),
                                (Nonsense(), mck.MetadataError, "Nonsense.describe():2:")):
        with pytest.raises(cls) as e:
            with mck.Source(service, streams=["orders"], stopping_offsets="latest").open() as s:
                list(s)
        assert words in one_line(e)
