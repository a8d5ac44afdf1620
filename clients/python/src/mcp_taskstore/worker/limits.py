"""Limits a tool declares with its description, which the service's
dispatcher holds across every worker and replica: at most so many of its
tasks at once per key (``ConcurrencyLimit``), at most so many starts per
window per key (``RateLimit``). A declaration the service would refuse is
refused here, when the tool is declared, rather than by every heartbeat."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_taskstore._proto import execution_pb2 as xpb

# The service's rules for a key (ConcurrencyLimit in proto/mcp/tasks/v1/execution.proto):
# a declaration it would refuse is refused here, when the tool is declared,
# rather than by every heartbeat of the worker.
_MAX_CONCURRENCY = 10_000
_MAX_KEY_CHARS = 256
_MAX_KEY_TERMS = 8
_MAX_KEY_DEPTH = 8
_KEY_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class ConcurrencyLimit:
    """At most ``max`` of a tool's tasks run at once per value of ``key``,
    sent to the service with its description; its other tasks wait in the
    service's backlog (spending no attempt). A task keeps the limit and key
    its tool had when it was created.

    ``key``: terms separated by commas, each ``tenant``, ``tool``,
    ``session`` or ``arguments.<name>[.<name>...]`` (at most 8 terms, 8
    names deep, 256 characters); empty: one key for the whole tool, across
    tenants. ``ConcurrencyLimit(3, "tenant, arguments.customer_id")``: at
    most 3 at once per customer of each tenant.
    """

    # 1 to 10,000.
    max: int
    key: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.max, int) or isinstance(self.max, bool):
            raise TypeError(f"ConcurrencyLimit.max must be an int, got {self.max!r}")
        if not 1 <= self.max <= _MAX_CONCURRENCY:
            raise ValueError(f"ConcurrencyLimit.max must be between 1 and {_MAX_CONCURRENCY}, got {self.max}")
        _check_key("ConcurrencyLimit.key", self.key)

    def message(self) -> xpb.ConcurrencyLimit:
        return xpb.ConcurrencyLimit(max=self.max, key=self.key)


_MAX_RATE_STARTS = 100_000
_MIN_RATE_WINDOW = 0.01
_MAX_RATE_WINDOW = 24 * 3600.0


@dataclass(frozen=True)
class RateLimit:
    """At most ``starts`` of a tool's tasks start within any window of ``per``
    seconds per value of ``key`` (the key as ``ConcurrencyLimit``'s), across
    every worker and replica; the others wait in the service's backlog
    (spending no attempt). ``RateLimit(20, 1.0)``: at most 20 starts a second
    for the whole tool. ``BackOff`` pauses the same key.
    """

    # 1 to 100,000.
    starts: int
    # The window, in seconds: 10 ms to 24 h.
    per: float
    key: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.starts, int) or isinstance(self.starts, bool):
            raise TypeError(f"RateLimit.starts must be an int, got {self.starts!r}")
        if not 1 <= self.starts <= _MAX_RATE_STARTS:
            raise ValueError(f"RateLimit.starts must be between 1 and {_MAX_RATE_STARTS}, got {self.starts}")
        if not isinstance(self.per, (int, float)) or isinstance(self.per, bool):
            raise TypeError(f"RateLimit.per must be seconds, got {self.per!r}")
        if not _MIN_RATE_WINDOW <= self.per <= _MAX_RATE_WINDOW:
            raise ValueError(f"RateLimit.per must be between 10 ms and 24 h, got {self.per!r} s")
        _check_key("RateLimit.key", self.key)

    def message(self) -> xpb.RateLimit:
        limit = xpb.RateLimit(starts=self.starts, key=self.key)
        limit.per.FromMilliseconds(round(self.per * 1000))
        return limit


def check_fairness_key(key: object) -> None:
    """Refuses a fairness key the service would refuse: within a tenant, the
    key whose values take turns when a tool's tasks wait for room (terms as
    ``ConcurrencyLimit.key``: ``"arguments.customer_id"``)."""
    _check_key("fairness_key", key)


def _check_key(owner: str, key: object) -> None:
    if not isinstance(key, str):
        raise TypeError(f"{owner} must be a str, got {key!r}")
    if len(key) > _MAX_KEY_CHARS:
        raise ValueError(f"{owner} must be at most {_MAX_KEY_CHARS} characters, got {len(key)}")
    terms = [term.strip() for term in key.strip().split(",")] if key.strip() else []
    if len(terms) > _MAX_KEY_TERMS:
        raise ValueError(f"{owner} has more than {_MAX_KEY_TERMS} terms: {key!r}")
    for term in terms:
        if term in ("tenant", "tool", "session"):
            continue
        names = term.removeprefix("arguments.").split(".") if term.startswith("arguments.") else None
        if names is None or len(names) > _MAX_KEY_DEPTH or not all(_KEY_NAME.fullmatch(n) for n in names):
            raise ValueError(
                f"{owner} term {term!r} is not tenant, tool, session or arguments.<path> "
                f"(at most {_MAX_KEY_DEPTH} names of A-Z a-z 0-9 _ -)"
            )
