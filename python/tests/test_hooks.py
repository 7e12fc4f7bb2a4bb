"""Client hooks written in Python: OAUTHBEARER tokens against a real broker's
SASL_SSL OAUTHBEARER listener (Kafka's unsecured JWS validator), client errors."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time

import multicluster_kafka as mck
import pytest

from conftest import _test_kafka_binary, create_topic, produce, unique


@pytest.fixture(scope="module")
def secured():
    """A cluster with secured listeners: its plaintext bootstrap and the properties
    of its OAUTHBEARER listener, without librdkafka's own token maker."""
    proc = subprocess.Popen([_test_kafka_binary(), "tok+secured"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line:
        pytest.fail(f"the secured cluster did not start (exit {proc.wait(timeout=30)})")
    started = json.loads(line)
    oauth = {k: v for k, v in started["tok+oauth"].items()
             if k not in ("enable.sasl.oauthbearer.unsecure.jwt", "sasl.oauthbearer.config")}
    try:
        yield started["tok"], oauth
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Tokens(mck.ClientHooks):
    """Unsecured JWTs ("alg": "none") for one principal, or a failing provider."""

    def __init__(self, fail=False):
        self.fail = fail
        self.asked = []
        self.errors = []

    def generate_oauth_token(self, cluster, oauthbearer_config):
        self.asked.append(cluster)
        if self.fail:
            raise ConnectionError("the token service is down")
        now = int(time.time())
        claims = {"sub": "carol", "iat": now, "exp": now + 300}
        header = b64(json.dumps({"alg": "none"}).encode())
        token = f"{header}.{b64(json.dumps(claims).encode())}."
        return mck.OAuthToken(token, "carol", (now + 300) * 1000)

    def error(self, cluster, kind, reason):
        self.errors.append((cluster, kind, reason))


def through_oauth(oauth: dict, topic: str) -> dict:
    props = dict(oauth)
    bootstrap = props.pop("bootstrap.servers")
    return {"clusters": {"tok": {"bootstrapServers": bootstrap, "properties": props}},
            "streams": {"s": {"clusters": {"tok": {"topics": [topic]}}}}}


def test_records_are_read_with_tokens_from_a_python_hook(secured):
    plain, oauth = secured
    topic = unique("tokens")
    create_topic(plain, topic, 2)
    produce(plain, topic, [f"t-{i}".encode() for i in range(40)])
    hooks = Tokens()
    source = mck.Source(through_oauth(oauth, topic), streams=["s"], stopping_offsets="latest",
                        client_hooks=hooks)
    with source.open() as stream:
        values = sorted(r.value for r in stream)
    assert values == sorted(f"t-{i}".encode() for i in range(40))
    assert hooks.asked and set(hooks.asked) == {"tok"}
    assert "token='[redacted]'" in repr(mck.OAuthToken("secret-jwt", "carol", 0))


def test_a_failing_token_hook_is_an_error_naming_the_cluster(secured):
    plain, oauth = secured
    topic = unique("refused")
    create_topic(plain, topic, 1)
    hooks = Tokens(fail=True)
    per_cluster = []

    def for_cluster(cluster):
        per_cluster.append(cluster)
        return hooks

    source = mck.Source(through_oauth(oauth, topic), streams=["s"], stopping_offsets="latest",
                        startup_timeout=5, client_timeout=3, client_hooks=for_cluster)
    with pytest.raises(mck.ClusterError) as e:
        with source.open() as stream:
            list(stream)
    message = str(e.value)
    assert "\n" not in message
    assert "cluster `tok`" in message and "the token service is down" in message, message
    assert e.value.cluster == "tok"
    assert hooks.asked and "tok" in per_cluster


def test_the_error_hook_hears_a_dead_cluster():
    hooks = Tokens()
    heard = threading.Event()
    hooks.error = lambda cluster, kind, reason: (hooks.errors.append((cluster, kind, reason)), heard.set())
    dead = {"clusters": {"gone": {"bootstrapServers": "127.0.0.1:1"}},
            "streams": {"s": {"clusters": {"gone": {"topics": ["t"]}}}}}
    source = mck.Source(dead, streams=["s"], stopping_offsets="latest", startup_timeout=2,
                        client_hooks=hooks)
    with pytest.raises(mck.UnreachableClusterError):
        with source.open() as stream:
            list(stream)
    assert heard.wait(5), "the error hook was called"
    cluster, kind, reason = hooks.errors[0]
    assert (cluster, kind) == ("gone", "transport") and reason


def test_client_hooks_of_the_wrong_type():
    with pytest.raises(mck.ConfigError):
        mck.Source({"clusters": {}, "streams": {}}, streams=["s"], client_hooks=42)
