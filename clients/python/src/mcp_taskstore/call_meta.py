"""What an MCP ``tools/call`` asks of its task in ``_meta``, read the way
``/mcp`` reads the same entries.

- ``mcp-taskstore/idempotency-key``: a client that may retry a call (after a
  lost response) names a key; the retry gets the first call's task instead
  of a second one.
- ``mcp-taskstore/start-at`` (RFC 3339) or ``mcp-taskstore/start-after-ms``:
  a dispatched task waits, ``working``, until then.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from mcp_taskstore.models import Dispatch

IDEMPOTENCY_META_KEY = "mcp-taskstore/idempotency-key"
START_AT_META_KEY = "mcp-taskstore/start-at"
START_AFTER_META_KEY = "mcp-taskstore/start-after-ms"


def _meta(request: Mapping[str, Any]) -> Mapping[str, Any]:
    params = request.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def idempotency_key_of(request: Mapping[str, Any]) -> str | None:
    """The key in a JSON-RPC request's ``params._meta``, if any.

    A key that is not a string is refused rather than ignored: a caller who
    asked for idempotency must not silently get a second task.
    """
    meta = _meta(request)
    if IDEMPOTENCY_META_KEY not in meta:
        return None
    key = meta[IDEMPOTENCY_META_KEY]
    if not isinstance(key, str):
        raise ValueError(f'_meta["{IDEMPOTENCY_META_KEY}"] must be a string')
    return key


def with_start_of(dispatch: Dispatch, request: Mapping[str, Any]) -> Dispatch:
    """``dispatch`` with the start the request's ``_meta`` names, if any
    (a start the dispatch names itself wins); one that does not read as a
    start is refused."""
    meta = _meta(request)
    at, after = meta.get(START_AT_META_KEY), meta.get(START_AFTER_META_KEY)
    if at is not None and after is not None:
        raise ValueError(f'_meta names both "{START_AT_META_KEY}" and "{START_AFTER_META_KEY}"')
    if dispatch.start_at is not None or dispatch.start_after is not None:
        return dispatch
    if at is not None:
        try:
            start_at = datetime.fromisoformat(at) if isinstance(at, str) else None
        except ValueError:
            start_at = None
        if start_at is None or start_at.tzinfo is None:
            raise ValueError(f'_meta["{START_AT_META_KEY}"] must be an RFC 3339 time')
        return dataclasses.replace(dispatch, start_at=start_at)
    if after is not None:
        if not isinstance(after, int) or isinstance(after, bool) or after < 0:
            raise ValueError(f'_meta["{START_AFTER_META_KEY}"] must be milliseconds')
        return dataclasses.replace(dispatch, start_after=timedelta(milliseconds=after))
    return dispatch
