"""How a tool says it failed: retryably (the task runs again after a
backoff) or finally (the task ends FAILED). In a module of their own, so
that the tool context, FastMCP's context and the tool registry each import
them without importing one another."""

from __future__ import annotations


class RetryableError(Exception):
    """A retry may succeed (a timeout, an upstream outage): the task is
    dispatched again after a backoff, until its attempts run out."""


class ToolFailure(Exception):
    """A retry cannot succeed: the task ends FAILED with this message (any
    other exception does the same)."""


class InvalidArguments(ToolFailure):
    """The arguments do not match the tool's input schema."""
