"""The ``tenant`` option (and its default, ``TASKSTORE_TENANT``): checked at
construction, sent as ``x-taskstore-tenant`` on every call. Against ``dev
--auth api-keys`` with a client key of tenant ``acme`` and an operator's admin
key of every tenant; and against ``dev --auth none``, where naming no tenant
means the ``default`` one."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mcp_taskstore import (
    ClientOptions,
    GrpcTaskStore,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    TaskStoreClient,
)

import services

REQUEST = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo"}}
ENDPOINT = "http://127.0.0.1:1"  # never called


# -- checked at construction, without a service --------------------------------


@pytest.mark.parametrize("tenant", ["", "has space", "x" * 129, "tab\there", "café", "*"])
def test_a_malformed_tenant_is_refused_at_construction(tenant: str) -> None:
    for make in (
        lambda: TaskStoreClient(ENDPOINT, tenant=tenant),
        lambda: GrpcTaskStore(ENDPOINT, tenant=tenant),
        lambda: ClientOptions(ENDPOINT, tenant=tenant),
    ):
        with pytest.raises(ValueError, match="^tenant must"):
            make()


def test_a_malformed_tenant_environment_variable_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKSTORE_TENANT", "a b")
    with pytest.raises(ValueError, match=r"^TASKSTORE_TENANT \(the default of tenant\) must"):
        TaskStoreClient(ENDPOINT)
    with pytest.raises(ValueError, match="^TASKSTORE_TENANT"):
        GrpcTaskStore(ENDPOINT)


def test_the_environment_is_the_default_and_the_option_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TASKSTORE_TENANT", "acme")
    assert TaskStoreClient(ENDPOINT).options.tenant == "acme"
    assert TaskStoreClient(ENDPOINT, tenant="globex").options.tenant == "globex"
    monkeypatch.setenv("TASKSTORE_TENANT", "")
    assert TaskStoreClient(ENDPOINT).options.tenant is None


def test_the_tenant_becomes_metadata() -> None:
    assert ClientOptions("h:1", token="tsk_abc", tenant="acme").metadata() == (
        ("authorization", "Bearer tsk_abc"),
        ("x-taskstore-tenant", "acme"),
    )
    long = "x" * 120 + "-_.:/~@!"
    assert ClientOptions("h:1", tenant=long).metadata() == (("x-taskstore-tenant", long),)


# -- against the service --------------------------------------------------------


@dataclass
class KeyedService:
    service: services.Service
    acme_key: str
    admin_key: str

    @property
    def endpoint(self) -> str:
        return self.service.endpoint


@pytest.fixture(scope="module")
def keyed() -> Iterator[KeyedService]:
    database_url = services.new_sqlite_url()
    acme_key = services.create_api_key(database_url, tenant="acme", role="client")
    admin_key = services.create_api_key(database_url, tenant="*", role="admin")
    service = services.start_dev(database_url, ["--auth", "api-keys", "--embedded-workers", "0"])
    try:
        yield KeyedService(service, acme_key, admin_key)
    finally:
        service.stop()


@pytest.fixture
async def acme_task(keyed: KeyedService) -> str:
    async with TaskStoreClient(keyed.endpoint, token=keyed.acme_key) as acme:
        return (await acme.create_task(request_json=REQUEST, request_id=1)).task_id


@pytest.mark.anyio
async def test_a_key_of_acme_acts_in_acme_named_or_not(keyed: KeyedService, acme_task: str) -> None:
    for tenant in (None, "acme"):
        async with TaskStoreClient(keyed.endpoint, token=keyed.acme_key, tenant=tenant) as acme:
            assert (await acme.get_task(acme_task)).task_id == acme_task


@pytest.mark.anyio
async def test_a_key_of_acme_naming_globex_is_permission_denied(keyed: KeyedService, acme_task: str) -> None:
    async with TaskStoreClient(keyed.endpoint, token=keyed.acme_key, tenant="globex") as acme:
        with pytest.raises(PermissionDeniedError, match="the credentials do not reach that tenant"):
            await acme.get_task(acme_task)


@pytest.mark.anyio
async def test_an_admin_key_naming_acme_gets_and_lists_its_task(keyed: KeyedService, acme_task: str) -> None:
    async with TaskStoreClient(keyed.endpoint, token=keyed.admin_key, tenant="acme") as admin:
        assert (await admin.get_task(acme_task)).task_id == acme_task
        assert acme_task in [t.task_id for t in (await admin.list_tasks()).tasks]
    store = GrpcTaskStore(keyed.endpoint, token=keyed.admin_key, tenant="acme")
    try:
        task = await store.get_task(acme_task)
        assert task is not None and task.taskId == acme_task
        assert acme_task in [t.taskId for t in (await store.list_tasks())[0]]
    finally:
        await store.close()


@pytest.mark.anyio
async def test_an_admin_key_with_taskstore_tenant_acme_does_the_same(
    keyed: KeyedService, acme_task: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TASKSTORE_TENANT", "acme")
    async with TaskStoreClient(keyed.endpoint, token=keyed.admin_key) as admin:
        assert (await admin.get_task(acme_task)).task_id == acme_task
        assert acme_task in [t.task_id for t in (await admin.list_tasks()).tasks]
    store = GrpcTaskStore(keyed.endpoint, token=keyed.admin_key)
    try:
        assert (await store.get_task(acme_task)) is not None
    finally:
        await store.close()


@pytest.mark.anyio
async def test_an_admin_key_naming_globex_does_not_see_acmes_task(keyed: KeyedService, acme_task: str) -> None:
    async with TaskStoreClient(keyed.endpoint, token=keyed.admin_key, tenant="globex") as admin:
        with pytest.raises(NotFoundError):
            await admin.get_task(acme_task)
        assert (await admin.list_tasks()).tasks == []
    store = GrpcTaskStore(keyed.endpoint, token=keyed.admin_key, tenant="globex")
    try:
        assert await store.get_task(acme_task) is None
        assert (await store.list_tasks())[0] == []
    finally:
        await store.close()


@pytest.mark.anyio
async def test_an_admin_key_naming_no_tenant_is_invalid_argument(keyed: KeyedService, acme_task: str) -> None:
    async with TaskStoreClient(keyed.endpoint, token=keyed.admin_key) as admin:
        with pytest.raises(InvalidArgumentError, match="x-taskstore-tenant"):
            await admin.get_task(acme_task)
        with pytest.raises(InvalidArgumentError, match="x-taskstore-tenant"):
            await admin.list_tasks()


@pytest.mark.anyio
async def test_without_authentication_no_tenant_is_the_default_one() -> None:
    service = services.start_dev(extra=["--embedded-workers", "0"])
    try:
        async with TaskStoreClient(service.endpoint) as anonymous:
            task_id = (await anonymous.create_task(request_json=REQUEST, request_id=1)).task_id
        async with TaskStoreClient(service.endpoint, tenant="default") as named:
            assert (await named.get_task(task_id)).task_id == task_id
        async with TaskStoreClient(service.endpoint, tenant="globex") as other:
            with pytest.raises(NotFoundError):
                await other.get_task(task_id)
    finally:
        service.stop()
