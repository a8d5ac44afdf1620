"""The worker's metrics (prometheus_client), named as taskworker's
(``taskworker_`` prefix, base units, ``_total`` counters; labels: the
tool and the outcome), so one dashboard reads workers of every language;
and the ``--metrics-listen`` endpoint: ``GET /metrics``, ``/livez``, and
``/readyz`` (200 while consuming jobs)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge, Histogram, generate_latest

logger = logging.getLogger("mcp_taskstore.worker")

SLOTS = Gauge("taskworker_slots", "Attempts this worker runs at once")
SLOTS_BUSY = Gauge("taskworker_slots_busy", "Slots running an attempt now")
JOBS = Counter(
    "taskworker_jobs", "Delivered jobs by what became of them (claimed, stale, requeued, malformed)", ["tool", "result"]
)
ATTEMPTS = Counter(
    "taskworker_attempts",
    "Attempts by outcome (completed, failed, released, parked, stopped, unreported)",
    ["tool", "outcome"],
)
ATTEMPT_SECONDS = Histogram("taskworker_attempt_duration_seconds", "How long attempts ran", ["tool", "outcome"])


def job(tool: str, result: str) -> None:
    JOBS.labels(tool, result).inc()


def attempt(tool: str, outcome: str, seconds: float) -> None:
    ATTEMPTS.labels(tool, outcome).inc()
    ATTEMPT_SECONDS.labels(tool, outcome).observe(seconds)


async def serve(address: str, ready: Callable[[], bool]) -> asyncio.base_events.Server:
    """Serve the metrics and probes on ``HOST:PORT``; returns the server (close it to stop)."""
    host, _, port = address.rpartition(":")

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), 5)
            while (await asyncio.wait_for(reader.readline(), 5)) not in (b"\r\n", b"\n", b""):
                pass
            parts = line.decode(errors="replace").split()
            path = parts[1].split("?")[0] if len(parts) > 1 else "/"
            if path == "/metrics":
                status, body, kind = "200 OK", generate_latest(), CONTENT_TYPE_LATEST
            elif path == "/livez":
                status, body, kind = "200 OK", b"ok\n", "text/plain"
            elif path == "/readyz":
                ok = ready()
                status, body = ("200 OK", b"ready\n") if ok else ("503 Service Unavailable", b"not ready\n")
                kind = "text/plain"
            else:
                status, body, kind = "404 Not Found", b"not found\n", "text/plain"
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode() + body)
            await writer.drain()
        except (asyncio.TimeoutError, ConnectionError):
            pass
        except Exception:
            logger.exception("metrics request failed")
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    server = await asyncio.start_server(handle, host.strip("[]") or "0.0.0.0", int(port))
    bound = server.sockets[0].getsockname()
    logger.info("serving metrics on http://%s:%d/metrics", bound[0], bound[1])
    return server
