"""``mcp-taskstore-worker module:tools``: run a worker from a module of tools.

``tools`` names a ``Tools``, a FastMCP server (its ``@mcp.tool()``s), or a
list of functions. The flags are ``taskworker``'s, with its environment
variables (``TASKWORKER_*``); SIGTERM or SIGINT stops gracefully (running
attempts get ``--shutdown-grace``, then are given back), a second one exits
at once.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

from mcp_taskstore.models import TlsConfig
from mcp_taskstore.worker.broker import AmqpTls
from mcp_taskstore.worker.heartbeat import WorkerRefused
from mcp_taskstore.worker.runtime import Worker, WorkerConfig, default_worker_id
from mcp_taskstore.worker.tools import load_tools

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|min|m|h)")
EXIT_AT_ONCE = 130


def parse_duration(text: str) -> float:
    """``500ms``, ``2s``, ``1m``, ``1h30m`` (humantime's common forms) in seconds."""
    text = text.strip()
    pos, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != pos and text[pos : match.start()].strip():
            break
        total += float(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    if pos == 0 or text[pos:].strip():
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 500ms, 2s, 1m)")
    return total


def _env(name: str, default: Any = None) -> Any:
    return os.environ.get(name) or default


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="mcp-taskstore-worker",
        description="Runs dispatched MCP tasks with Python tools for a taskstore service.",
    )
    p.add_argument("tools", metavar="MODULE:TOOLS", help="the tools: a Tools, a FastMCP server or a list of functions")
    add = p.add_argument
    add("--endpoint", default=_env("TASKWORKER_ENDPOINT", "http://127.0.0.1:50051"), help="the taskstore service")
    add("--amqp-url", default=_env("TASKWORKER_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f"), help="RabbitMQ")
    add("--amqp-url-file", type=Path, default=_env("TASKWORKER_AMQP_URL_FILE"), help="a file holding the RabbitMQ URL")
    add("--amqp-ca-cert", type=Path, default=_env("TASKWORKER_AMQP_CA_CERT"), help="CA (PEM) for amqps://")
    add("--amqp-client-cert", type=Path, default=_env("TASKWORKER_AMQP_CLIENT_CERT"), help="client cert for amqps://")
    add("--amqp-client-key", type=Path, default=_env("TASKWORKER_AMQP_CLIENT_KEY"), help="its private key")
    add("--queue-prefix", default=_env("TASKWORKER_QUEUE_PREFIX", "taskstore"), help="the service's --queue-prefix")
    add("--queue-type", default=_env("TASKWORKER_QUEUE_TYPE"), choices=["quorum", "classic"],
        help="the service's --queue-type, checked against the queue type its Heartbeat announces, which is used")  # fmt: skip
    add("--concurrency", type=int, default=int(_env("TASKWORKER_CONCURRENCY", 4)), help="attempts run at once")
    add("--worker-id", default=_env("TASKWORKER_ID"), help="this worker's name (default: host/pid)")
    add("--shutdown-grace", type=parse_duration, default=_env("TASKWORKER_SHUTDOWN_GRACE", "30s"),
        help="on SIGTERM, how long running attempts may finish before they are given back")  # fmt: skip
    add("--park-after", type=parse_duration, default=_env("TASKWORKER_PARK_AFTER", "1m"),
        help="how long a question may wait for its answer while its tool holds a slot")  # fmt: skip
    add("--cancel-grace", type=parse_duration, default=_env("TASKWORKER_CANCEL_GRACE", "5s"),
        help="how long a cancelled tool may take to return before it is abandoned")  # fmt: skip
    add("--token", default=_env("TASKWORKER_TOKEN"), help="the API key (a worker key); prefer --token-file")
    add("--token-file", type=Path, default=_env("TASKWORKER_TOKEN_FILE"), help="a file holding the API key")
    add("--ca-cert", type=Path, default=_env("TASKWORKER_CA_CERT"), help="CA (PEM) for an https:// endpoint")
    add("--client-cert", type=Path, default=_env("TASKWORKER_CLIENT_CERT"), help="client cert for --auth mtls")
    add("--client-key", type=Path, default=_env("TASKWORKER_CLIENT_KEY"), help="its private key")
    add("--metrics-listen", default=_env("TASKWORKER_METRICS_LISTEN"), help="HOST:PORT for /metrics, /livez, /readyz")
    add("--log-format", default=_env("TASKWORKER_LOG_FORMAT", "text"), choices=["text", "json"])
    add("--log-level", default=_env("TASKWORKER_LOG", "info"))
    return p


def load(target: str) -> Any:
    """``package.module:attribute`` (the working directory is importable)."""
    module_name, _, attribute = target.partition(":")
    if not module_name or not attribute:
        raise SystemExit(f"mcp-taskstore-worker: give MODULE:TOOLS, e.g. my_tools:tools (got {target!r})")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    value: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        value = getattr(value, part)
    return value


def _read(path: Path | None) -> bytes | None:
    return None if path is None else path.read_bytes()


def config_from(args: argparse.Namespace) -> WorkerConfig:
    if args.token and args.token_file:
        raise SystemExit("mcp-taskstore-worker: give --token or --token-file, not both")
    token = args.token_file.read_text().strip() if args.token_file else args.token
    amqp_url = args.amqp_url_file.read_text().rstrip("\r\n") if args.amqp_url_file else args.amqp_url
    if (args.client_cert is None) != (args.client_key is None):
        raise SystemExit("mcp-taskstore-worker: --client-cert and --client-key go together")
    tls = None
    if args.ca_cert or args.client_cert:
        tls = TlsConfig(ca=_read(args.ca_cert), cert=_read(args.client_cert), key=_read(args.client_key))
    return WorkerConfig(
        endpoint=args.endpoint,
        amqp_url=amqp_url,
        amqp_tls=AmqpTls(args.amqp_ca_cert, args.amqp_client_cert, args.amqp_client_key),
        queue_prefix=args.queue_prefix,
        queue_type=args.queue_type,
        concurrency=args.concurrency,
        worker_id=args.worker_id or default_worker_id(),
        shutdown_grace=args.shutdown_grace,
        park_after=args.park_after,
        cancel_grace=args.cancel_grace,
        token=token or None,
        tls=tls,
        metrics_listen=args.metrics_listen,
    )


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {"level": record.levelname, "target": record.name, "message": record.getMessage()}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _logging(fmt: str, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    logging.getLogger("aio_pika").setLevel(logging.WARNING)
    logging.getLogger("aiormq").setLevel(logging.WARNING)


async def _run(worker: Worker) -> None:
    loop = asyncio.get_running_loop()
    signals = {"count": 0}

    def on_signal(name: str) -> None:
        signals["count"] += 1
        if signals["count"] > 1:
            logging.getLogger("mcp_taskstore.worker").warning("second %s: exiting at once", name)
            os._exit(EXIT_AT_ONCE)
        logging.getLogger("mcp_taskstore.worker").info("%s: shutting down (send it again to exit at once)", name)
        worker.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    await worker.run()
    # Tools abandoned after ignoring their cancellation may still run:
    # asyncio.run would wait for them; the worker is done, so exit now.
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    if others and (await asyncio.wait(others, timeout=1.0))[1]:
        logging.getLogger("mcp_taskstore.worker").warning("abandoned tools still running; exiting without them")
        logging.shutdown()
        os._exit(0)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    _logging(args.log_format, args.log_level)
    try:
        tools = load_tools(load(args.tools))
        worker = Worker(tools, config_from(args))
    except (ImportError, AttributeError, TypeError, ValueError) as error:
        print(f"mcp-taskstore-worker: {error}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_run(worker))
    except WorkerRefused as error:
        logging.getLogger("mcp_taskstore.worker").error("%s", error)
        return 1
    except RuntimeError as error:
        logging.getLogger("mcp_taskstore.worker").error("worker stopped with an error: %s", error)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
