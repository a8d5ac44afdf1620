"""Fixtures: the real service per test module, and stores under test."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterator

import pytest
from mcp.shared.experimental.tasks.in_memory_task_store import InMemoryTaskStore
from mcp.shared.experimental.tasks.store import TaskStore

from mcp_taskstore import GrpcTaskStore

import services


@pytest.fixture(autouse=True)
def _no_tenant_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients made by the tests name a tenant only when a test says so."""
    monkeypatch.delenv("TASKSTORE_TENANT", raising=False)


# grpc.aio runs on asyncio only.
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ServicePool:
    """Starts each kind of service on first use; stops them all at the end."""

    def __init__(self) -> None:
        self._running: dict[str, services.Service] = {}

    def get(self, kind: str) -> services.Service:
        if kind not in self._running:
            self._running[kind] = services.start(kind)
        return self._running[kind]

    def stop(self) -> None:
        for service in self._running.values():
            service.stop()
        self._running.clear()


@pytest.fixture(scope="module")
def service_pool() -> Iterator[ServicePool]:
    # Module scope: every test module gets fresh services (a fresh database).
    pool = ServicePool()
    yield pool
    pool.stop()


StoreFactory = Callable[..., TaskStore]


@pytest.fixture(params=["memory", "serve", "dev"])
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def make_store(store_kind: str, service_pool: ServicePool) -> AsyncIterator[StoreFactory]:
    """Build the store under test; each gRPC store gets a session of its own,
    so the tests of one module do not see each other's tasks."""
    session = f"test-{uuid.uuid4().hex}"
    made: list[GrpcTaskStore] = []

    def make(page_size: int = 10) -> TaskStore:
        if store_kind == "memory":
            return InMemoryTaskStore(page_size=page_size)
        service = service_pool.get(store_kind)
        grpc_store = GrpcTaskStore(service.endpoint, session_id=session, page_size=page_size)
        made.append(grpc_store)
        return grpc_store

    yield make
    for grpc_store in made:
        await grpc_store.close()


@pytest.fixture
def store(make_store: StoreFactory) -> TaskStore:
    return make_store()


@pytest.fixture(params=["serve", "dev"])
def service(request: pytest.FixtureRequest, service_pool: ServicePool) -> services.Service:
    """The real service, once as PostgreSQL `serve` (with a taskworker) and once as `dev`."""
    return service_pool.get(str(request.param))
