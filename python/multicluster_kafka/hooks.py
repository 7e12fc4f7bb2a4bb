"""Hooks a program puts into each cluster's Kafka clients:
``Source(client_hooks=MyHooks())`` (every cluster) or
``Source(client_hooks=lambda cluster: MyHooks() if cluster == "east" else None)``."""

from __future__ import annotations

from typing import NamedTuple, Optional

__all__ = ["ClientHooks", "OAuthToken"]


class OAuthToken(NamedTuple):
    """An OAUTHBEARER token: the token (a JWT, for most identity providers), the
    principal it is for, and when it expires (milliseconds since the epoch)."""

    token: str
    principal_name: str
    lifetime_ms: int

    def __repr__(self) -> str:
        return f"OAuthToken(token='[redacted]', principal_name={self.principal_name!r}, lifetime_ms={self.lifetime_ms})"


class ClientHooks:
    """Override what you need; each is called on a client's thread (take care with
    shared state), with the logical cluster id first. An exception in ``error`` or
    ``stats_raw`` is reported as unraisable and otherwise ignored."""

    def enable_token_refresh(self) -> bool:
        """True when :meth:`generate_oauth_token` makes the cluster's OAUTHBEARER
        tokens (by default: when a subclass defines it). Otherwise librdkafka's own
        OIDC or unsecured-JWT handling, as the properties say."""
        return type(self).generate_oauth_token is not ClientHooks.generate_oauth_token

    def generate_oauth_token(self, cluster: str, oauthbearer_config: Optional[str]) -> OAuthToken:
        """A new token for ``cluster`` (``oauthbearer_config`` is its
        ``sasl.oauthbearer.config`` property). An exception is the reason the token is
        missing; the client tries again later."""
        raise NotImplementedError("this ClientHooks does not make OAUTHBEARER tokens")

    def error(self, cluster: str, kind: str, reason: str) -> None:
        """A client-level error (brokers down, authentication failed, ...): its kind
        (``"transport"``, ``"authentication"``, ...) and the client's text, which never
        holds a property value."""

    def stats_raw(self, cluster: str, statistics: bytes) -> None:
        """librdkafka's statistics JSON, every ``statistics.interval.ms`` (a property;
        off unless set)."""
