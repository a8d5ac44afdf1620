"""How a tool says it failed: retryably (the task runs again after a
backoff), finally (the task ends FAILED), or that its key must back off
until a time (the task waits, its attempt not spent). In a module of their own, so
that the tool context, FastMCP's context and the tool registry each import
them without importing one another."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone


class RetryableError(Exception):
    """A retry may succeed (a timeout, an upstream outage): the task is
    dispatched again after a backoff, until its attempts run out."""


class BackOff(Exception):
    """"Back off this tool's key until ``until``" (a 429's Retry-After): the
    task is given back without spending an attempt, and every task of the
    key (its rate key, else its concurrency key, else the whole tool) waits
    until then. At most 24 hours ahead; a time already passed means now.
    ``BackOff.after(seconds)`` backs off for that long from now."""

    def __init__(self, until: datetime, message: str = "backing off") -> None:
        if until.tzinfo is None:
            raise ValueError("BackOff needs an aware datetime (with a time zone)")
        super().__init__(message)
        self.until = until

    @classmethod
    def after(cls, seconds: float, message: str = "backing off") -> BackOff:
        if not seconds >= 0:
            raise ValueError(f"BackOff.after needs seconds >= 0, got {seconds!r}")
        return cls(datetime.now(timezone.utc) + timedelta(seconds=seconds), message)


class ToolFailure(Exception):
    """A retry cannot succeed: the task ends FAILED with this message (any
    other exception does the same)."""


class InvalidArguments(ToolFailure):
    """The arguments do not match the tool's input schema."""
