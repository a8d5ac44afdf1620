// The `tenant` option (and its default, TASKSTORE_TENANT): sent as
// x-taskstore-tenant on every call, against `dev --auth api-keys` with a
// client key of tenant acme and an operator's admin key of every tenant;
// and against `dev --auth none`, where naming no tenant means `default`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GrpcTaskStore, TaskStoreClient, TaskStoreError, type ClientOptions } from '@mcp-taskstore/client';
import { binary, listeningAddr, spawnLogged, startService, stopProcess, type RunningService } from './helpers/service.js';

const REQUEST = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo' } };

const hasCode = (codeName: string, message?: RegExp) => (e: unknown) =>
  e instanceof TaskStoreError && e.codeName === codeName && (message === undefined || message.test(e.message));

/** Runs `fn` with TASKSTORE_TENANT set to `value` (unset when undefined), then restores it. */
function withTenantEnv<T>(value: string | undefined, fn: () => T): T {
  const saved = process.env['TASKSTORE_TENANT'];
  if (value === undefined) delete process.env['TASKSTORE_TENANT'];
  else process.env['TASKSTORE_TENANT'] = value;
  try {
    return fn();
  } finally {
    if (saved === undefined) delete process.env['TASKSTORE_TENANT'];
    else process.env['TASKSTORE_TENANT'] = saved;
  }
}

describe('the tenant option, checked at construction', () => {
  const endpoint = 'http://127.0.0.1:1'; // never called
  for (const tenant of ['', 'has space', 'x'.repeat(129), 'tab\there', 'caf\u00e9', '*']) {
    it(`refuses ${JSON.stringify(tenant.length > 20 ? `${tenant.slice(0, 8)}…(${tenant.length})` : tenant)}`, () => {
      const makers: Array<() => unknown> = [() => new TaskStoreClient({ endpoint, tenant }), () => new GrpcTaskStore({ endpoint, tenant })];
      for (const make of makers) {
        assert.throws(() => withTenantEnv(undefined, make), /the tenant option must/);
      }
    });
  }
  it('refuses a malformed TASKSTORE_TENANT, naming the variable', () => {
    assert.throws(() => withTenantEnv('a b', () => new TaskStoreClient({ endpoint })), /TASKSTORE_TENANT .*tenant option.* must/);
    assert.throws(() => withTenantEnv('a b', () => new GrpcTaskStore({ endpoint })), /TASKSTORE_TENANT/);
  });
  it('takes TASKSTORE_TENANT when the option is not given, and the option over it', () => {
    withTenantEnv('acme', () => {
      const fromEnv = new TaskStoreClient({ endpoint });
      const given = new TaskStoreClient({ endpoint, tenant: 'globex' });
      assert.equal(fromEnv.tenant, 'acme');
      assert.equal(given.tenant, 'globex');
      fromEnv.close();
      given.close();
    });
    withTenantEnv('', () => {
      const none = new TaskStoreClient({ endpoint });
      assert.equal(none.tenant, undefined);
      none.close();
    });
  });
  it('accepts 128 printable ASCII characters', () => {
    const tenant = `${'x'.repeat(120)}-_.:/~@!`;
    const client = new TaskStoreClient({ endpoint, tenant });
    assert.equal(client.tenant, tenant);
    client.close();
  });
});

describe('tenants with API keys (dev --auth api-keys)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-tenant-'));
  const db = `sqlite://${join(dir, 'tasks.db')}`;
  let proc: ReturnType<typeof spawnLogged> | undefined;
  let endpoint = '';
  let acmeKey = '';
  let adminKey = '';
  let taskId = '';
  const opened: Array<{ close(): void }> = [];
  // Every client here is made with TASKSTORE_TENANT unset, unless a test sets it.
  const client = (opts: Omit<ClientOptions, 'endpoint'>) => {
    const c = withTenantEnv(undefined, () => new TaskStoreClient({ endpoint, ...opts }));
    opened.push(c);
    return c;
  };

  before(async () => {
    const bin = binary('TASKSTORE_BIN', 'taskstore');
    proc = spawnLogged(bin, [
      '--log-format', 'json', 'dev', '--listen', '127.0.0.1:0', '--mcp-listen', 'off', '--dashboard-listen', 'off', '--database-url', db,
      '--auth', 'api-keys', '--embedded-workers', '0', '--shutdown-grace', '1s',
    ]);
    endpoint = `http://${await listeningAddr(proc, 'taskstore dev (api keys)')}`;
    const key = (tenant: string, role: string) =>
      (JSON.parse(execFileSync(bin, ['keys', '--database-url', db, 'create', '--tenant', tenant, '--role', role, '--json'], { encoding: 'utf8' })) as { key: string }).key;
    acmeKey = key('acme', 'client');
    adminKey = key('*', 'admin');
    const task = await client({ token: acmeKey }).createTask({ requestId: 1, request: REQUEST, ttl: 600_000 });
    taskId = task.taskId;
  });
  after(async () => {
    for (const c of opened) c.close();
    if (proc) await stopProcess(proc);
    rmSync(dir, { recursive: true, force: true });
  });

  it('a key of tenant acme acts in acme, with or without naming it', async () => {
    assert.equal((await client({ token: acmeKey }).getTask(taskId)).status, 'working');
    assert.equal((await client({ token: acmeKey, tenant: 'acme' }).getTask(taskId)).status, 'working');
  });

  it('a key of tenant acme naming globex is PERMISSION_DENIED', async () => {
    await assert.rejects(
      client({ token: acmeKey, tenant: 'globex' }).getTask(taskId),
      hasCode('PERMISSION_DENIED', /the credentials do not reach that tenant/),
    );
  });

  it("an every-tenant admin key with tenant: 'acme' gets and lists acme's task", async () => {
    const admin = client({ token: adminKey, tenant: 'acme' });
    assert.equal((await admin.getTask(taskId)).taskId, taskId);
    assert.ok((await admin.listTasks()).tasks.some((t) => t.taskId === taskId));
  });

  it('an every-tenant admin key with TASKSTORE_TENANT=acme does the same', async () => {
    const admin = withTenantEnv('acme', () => new TaskStoreClient({ endpoint, token: adminKey }));
    opened.push(admin);
    assert.equal(admin.tenant, 'acme');
    assert.equal((await admin.getTask(taskId)).taskId, taskId);
    assert.ok((await admin.listTasks()).tasks.some((t) => t.taskId === taskId));
    const store = withTenantEnv('acme', () => new GrpcTaskStore({ endpoint, token: adminKey }));
    opened.push(store);
    assert.equal((await store.getTask(taskId))?.taskId, taskId);
    assert.ok((await store.listTasks()).tasks.some((t) => t.taskId === taskId));
  });

  it("an every-tenant admin key naming globex does not see acme's task", async () => {
    const admin = client({ token: adminKey, tenant: 'globex' });
    await assert.rejects(admin.getTask(taskId), hasCode('NOT_FOUND'));
    assert.deepEqual((await admin.listTasks()).tasks, []);
    const store = withTenantEnv(undefined, () => new GrpcTaskStore({ endpoint, token: adminKey, tenant: 'globex' }));
    opened.push(store);
    assert.equal(await store.getTask(taskId), null);
    assert.deepEqual((await store.listTasks()).tasks, []);
  });

  it('an every-tenant admin key naming no tenant is INVALID_ARGUMENT, pointing at x-taskstore-tenant', async () => {
    const admin = client({ token: adminKey });
    await assert.rejects(admin.getTask(taskId), hasCode('INVALID_ARGUMENT', /x-taskstore-tenant/));
    await assert.rejects(admin.listTasks(), hasCode('INVALID_ARGUMENT', /x-taskstore-tenant/));
  });
});

describe('tenants without authentication (dev --auth none)', () => {
  let service: RunningService | undefined;
  const opened: TaskStoreClient[] = [];
  const client = (tenant?: string) => {
    const c = withTenantEnv(undefined, () => new TaskStoreClient({ endpoint: service!.endpoint, ...(tenant !== undefined && { tenant }) }));
    opened.push(c);
    return c;
  };
  before(async () => {
    service = await startService('dev', { args: ['--embedded-workers', '0'] });
  });
  after(async () => {
    for (const c of opened) c.close();
    await service?.stop();
  });

  it('naming no tenant acts in the default tenant', async () => {
    const { taskId } = await client().createTask({ requestId: 1, request: REQUEST, ttl: 600_000 });
    assert.equal((await client('default').getTask(taskId)).taskId, taskId);
    await assert.rejects(client('globex').getTask(taskId), hasCode('NOT_FOUND'));
  });
});
