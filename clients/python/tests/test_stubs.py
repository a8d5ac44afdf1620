"""The checked-in stubs match what proto/ generates today, and import cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GEN = Path(__file__).resolve().parents[1] / "scripts" / "gen_protos.py"


def test_stubs_are_current() -> None:
    run = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_stubs_live_beside_the_mcp_sdk() -> None:
    # The naming trap: stubs named mcp.tasks.v1 would clash with the SDK.
    import mcp.types  # noqa: F401

    from mcp_taskstore._proto import operations_pb2, task_store_pb2

    assert task_store_pb2.DESCRIPTOR.package == "mcp.tasks.v1"
    assert operations_pb2.DESCRIPTOR.name == "mcp/tasks/v1/operations.proto"
