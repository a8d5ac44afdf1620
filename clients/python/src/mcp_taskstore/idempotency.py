"""The idempotency key of an MCP ``tools/call``, read from its ``_meta``.

A client that may retry a call (after a lost response) names a key in
``params._meta["mcp-taskstore/idempotency-key"]``; ``/mcp`` reads the same
entry. The store passes it on with the create, so the retry gets the first
call's task instead of a second one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

IDEMPOTENCY_META_KEY = "mcp-taskstore/idempotency-key"


def idempotency_key_of(request: Mapping[str, Any]) -> str | None:
    """The key in a JSON-RPC request's ``params._meta``, if any.

    A key that is not a string is refused rather than ignored: a caller who
    asked for idempotency must not silently get a second task.
    """
    params = request.get("params")
    meta = params.get("_meta") if isinstance(params, Mapping) else None
    if not isinstance(meta, Mapping) or IDEMPOTENCY_META_KEY not in meta:
        return None
    key = meta[IDEMPOTENCY_META_KEY]
    if not isinstance(key, str):
        raise ValueError(f'_meta["{IDEMPOTENCY_META_KEY}"] must be a string')
    return key
