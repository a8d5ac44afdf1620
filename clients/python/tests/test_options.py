"""Connection options, checked without a server."""

from __future__ import annotations

import pytest

from mcp_taskstore import ClientOptions, TaskStatus, TlsConfig


@pytest.mark.parametrize(
    ("endpoint", "tls", "expected"),
    [
        ("http://127.0.0.1:50051", None, ("127.0.0.1:50051", False)),
        ("https://tasks.example:443/", None, ("tasks.example:443", True)),
        ("localhost:50051", None, ("localhost:50051", False)),
        ("localhost:50051", TlsConfig(ca=b"pem"), ("localhost:50051", True)),
    ],
)
def test_endpoint_forms(endpoint: str, tls: TlsConfig | None, expected: tuple[str, bool]) -> None:
    assert ClientOptions(endpoint, tls=tls).target_and_security() == expected


def test_tls_with_plain_http_is_refused() -> None:
    with pytest.raises(ValueError, match="https"):
        ClientOptions("http://h:1", tls=TlsConfig(ca=b"pem")).target_and_security()


def test_token_becomes_bearer_metadata() -> None:
    assert ClientOptions("h:1", token="tsk_abc").metadata() == (("authorization", "Bearer tsk_abc"),)
    assert ClientOptions("h:1").metadata() == ()


def test_status_names_follow_mcp() -> None:
    assert TaskStatus.from_mcp("input_required") is TaskStatus.INPUT_REQUIRED
    assert TaskStatus.CANCELLED.mcp_name == "cancelled"
    assert TaskStatus.FAILED.is_terminal and not TaskStatus.WORKING.is_terminal
