"""Start the real taskstore service (and workers) for the tests.

Two shapes, as the README of the service describes them:
- ``serve``: PostgreSQL + RabbitMQ, with a separate ``taskworker`` fleet;
- ``dev``: one process with SQLite, an in-process queue and embedded workers.
PostgreSQL and RabbitMQ must be running; a test that needs them fails with
a message naming the missing one (it is never skipped).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import pika
from pika.exceptions import ChannelClosedByBroker

REPO = Path(__file__).resolve().parents[3]


def _binary(env: str, name: str) -> str:
    return os.environ.get(env) or str(REPO / "target" / "debug" / name)


def taskstore_bin() -> str:
    return _binary("TASKSTORE_BIN", "taskstore")


def taskworker_bin() -> str:
    return _binary("TASKWORKER_BIN", "taskworker")


DATABASE_URL = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres")
AMQP_URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2f")


def _require_tcp(url: str, default_port: int, what: str) -> None:
    parsed = urlparse(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or default_port
    try:
        with socket.create_connection((host, port), timeout=3):
            return
    except OSError as error:
        raise RuntimeError(f"{what} is not reachable at {host}:{port} ({error}); start it (see .ci/run)") from None


def delete_amqp_topology(prefix: str, tools: list[str]) -> None:
    """Delete what ``serve`` and its workers declared under ``prefix``: the
    quorum queue of each tool (``<prefix>.tool.<tool>``) and the exchange
    (``<prefix>.jobs``). Names that are already gone are fine."""
    names = [("queue", f"{prefix}.tool.{tool}") for tool in tools] + [("exchange", f"{prefix}.jobs")]
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    try:
        channel = connection.channel()
        for kind, name in names:
            try:
                if kind == "queue":
                    channel.queue_delete(queue=name)
                else:
                    channel.exchange_delete(exchange=name)
            except ChannelClosedByBroker as error:
                if error.reply_code != 404:  # NOT_FOUND: already gone
                    raise
                channel = connection.channel()  # the broker closed the channel
    finally:
        connection.close()


def _with_database(url: str, name: str) -> str:
    parsed = urlparse(url)
    return parsed._replace(path=f"/{name}").geturl()


def _psql(sql: str) -> None:
    subprocess.run(
        ["psql", _with_database(DATABASE_URL, "postgres"), "-v", "ON_ERROR_STOP=1", "-q", "-c", sql],
        check=True,
        capture_output=True,
    )


@dataclass
class Process:
    """A child process whose stderr goes to a log file we can search."""

    proc: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def spawn(args: list[str], name: str, env: dict[str, str] | None = None) -> Process:
    log = Path(tempfile.mkdtemp(prefix=f"py-{name}-")) / "stderr.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=sink, env=env)
    return Process(proc, log)


def wait_for_listening(process: Process, timeout: float = 60.0) -> str:
    """Return HOST:PORT from the service's JSON ``listening`` log line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in process.log.read_text(errors="replace").splitlines():
            if '"listening"' not in line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            fields = record.get("fields", record)
            if fields.get("message") == "listening" and "addr" in fields:
                return str(fields["addr"])
        if process.proc.poll() is not None:
            raise RuntimeError(f"taskstore exited with {process.proc.returncode}:\n{process.tail()}")
        time.sleep(0.05)
    process.stop()
    raise RuntimeError(f"taskstore did not log 'listening' within {timeout}s:\n{process.tail()}")


@dataclass
class Service:
    """A running taskstore and what it needs; ``endpoint`` is http://HOST:PORT."""

    kind: str
    addr: str
    processes: list[Process] = field(default_factory=list)
    cleanups: list[object] = field(default_factory=list)
    # serve only: what another replica (``start_replica``) shares with it.
    database_url: str = ""
    queue_prefix: str = ""

    @property
    def endpoint(self) -> str:
        return f"http://{self.addr}"

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()
        # Every cleanup runs even if one fails; the first failure is raised.
        failure: BaseException | None = None
        for cleanup in reversed(self.cleanups):
            try:
                cleanup()  # type: ignore[operator]
            except Exception as error:
                failure = failure or error
        if failure is not None:
            raise failure


# The tests ask for `ttl: None` tasks; the server grants them only without a max ttl.
COMMON_FLAGS = ["--poll-interval", "200ms"]


def new_sqlite_url() -> str:
    return f"sqlite://{Path(tempfile.mkdtemp(prefix='py-taskstore-dev-')) / 'tasks.db'}"


def create_api_key(database_url: str, tenant: str = "default", role: str = "client") -> str:
    """Make an API key in the database (``taskstore keys create``); tenant ``*`` is every tenant."""
    out = subprocess.run(
        [
            taskstore_bin(),
            "keys",
            "--database-url",
            database_url,
            "create",
            "--tenant",
            tenant,
            "--role",
            role,
            "--json",
        ],
        check=True,
        capture_output=True,
    )
    return str(json.loads(out.stdout)["key"])


def start_dev(database_url: str | None = None, extra: list[str] | None = None, max_ttl: str = "unlimited") -> Service:
    args = [
        taskstore_bin(), "--log-format", "json", "dev",
        "--listen", "127.0.0.1:0",
        "--mcp-listen", "127.0.0.1:0",
        "--dashboard-listen", "off",
        "--database-url", database_url or new_sqlite_url(),
        "--worker-tools", "echo,sleep,fail",
        "--max-ttl", max_ttl,
        *COMMON_FLAGS,
        *(extra or []),
    ]  # fmt: skip
    process = spawn(args, "dev")
    addr = wait_for_listening(process)
    return Service("dev", addr, [process])


def start_serve(
    worker_tools: str = "echo,sleep,fail", extra: list[str] | None = None, auth: str = "none", worker: bool = True
) -> Service:
    """``serve`` on a fresh database and queue prefix, with a taskworker of
    ``worker_tools`` unless ``worker`` is False; ``extra``: more serve flags
    (e.g. a short ``--lease-duration``); ``auth``: ``none`` or ``api-keys``."""
    _require_tcp(DATABASE_URL, 5432, "PostgreSQL")
    _require_tcp(AMQP_URL, 5672, "RabbitMQ")
    unique = uuid.uuid4().hex[:12]
    db_name = f"py_{unique}"
    try:
        _psql(f'CREATE DATABASE "{db_name}"')
    except subprocess.CalledProcessError as error:
        raise RuntimeError(f"PostgreSQL refused CREATE DATABASE: {error.stderr.decode(errors='replace')}") from None
    prefix = f"py-{unique}"
    service = Service("serve", "", [], database_url=_with_database(DATABASE_URL, db_name), queue_prefix=prefix)
    service.cleanups.append(lambda: _psql(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)'))
    # Runs after the processes stopped (so no worker redeclares its queue).
    tools = [tool for tool in worker_tools.split(",") if tool]
    service.cleanups.append(lambda: delete_amqp_topology(prefix, tools))
    try:
        args = [
            taskstore_bin(), "--log-format", "json", "serve",
            "--auth", auth,
            "--listen", "127.0.0.1:0",
            "--database-url", _with_database(DATABASE_URL, db_name),
            "--amqp-url", AMQP_URL,
            "--queue-prefix", prefix,
            "--max-ttl", "unlimited",
            *COMMON_FLAGS,
            *(extra or []),
        ]  # fmt: skip
        process = spawn(args, "serve")
        service.processes.append(process)
        service.addr = wait_for_listening(process)
        if not worker:
            return service
        worker_process = spawn(
            [
                taskworker_bin(),
                "--endpoint",
                service.endpoint,
                "--amqp-url",
                AMQP_URL,
                "--queue-prefix",
                prefix,
                "--tools",
                worker_tools,
            ],  # fmt: skip
            "worker",
        )
        service.processes.append(worker_process)
    except BaseException:
        service.stop()
        raise
    return service


def start_replica(service: Service, listen: str = "127.0.0.1:0") -> Process:
    """Another ``taskstore serve`` on a serve-mode service's database and broker
    (no workers of its own); the caller stops it. Its address: ``wait_for_listening``."""
    assert service.kind == "serve", "a replica needs a serve-mode service"
    args = [
        taskstore_bin(), "--log-format", "json", "serve",
        "--auth", "none",
        "--listen", listen,
        "--database-url", service.database_url,
        "--amqp-url", AMQP_URL,
        "--queue-prefix", service.queue_prefix,
        "--max-ttl", "unlimited",
        *COMMON_FLAGS,
    ]  # fmt: skip
    return spawn(args, "replica")


def start(kind: str) -> Service:
    return start_dev() if kind == "dev" else start_serve()


def mcp_url(service: Service) -> str:
    """The ``/mcp`` URL a ``serve`` started with ``--mcp-listen`` logged."""
    for line in service.processes[0].log.read_text(errors="replace").splitlines():
        if '"listening"' in line:
            record = json.loads(line)
            fields = record.get("fields", record)
            return str(fields["mcp"])
    raise RuntimeError("the service logged no listening line")
