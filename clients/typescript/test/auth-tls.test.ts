// The `token` and `tls` options against a service that demands both: API
// keys over TLS with a self-signed certificate (dev, SQLite; made here with
// openssl).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { GrpcTaskStore, TaskStoreError } from '@mcp-taskstore/client';
import { binary, listeningAddr, spawnLogged, stopProcess } from './helpers/service.js';

const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('API key over TLS', { skip: !hasOpenssl && 'openssl is not installed' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-auth-'));
  const db = `sqlite://${join(dir, 'tasks.db')}`;
  let proc: ReturnType<typeof spawnLogged> | undefined;
  let endpoint = '';
  let token = '';
  let ca: Buffer;

  before(async () => {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ], { stdio: 'ignore' });
    ca = readFileSync(join(dir, 'cert.pem'));
    const bin = binary('TASKSTORE_BIN', 'taskstore');
    // TLS is not offered with embedded workers; none are needed here.
    proc = spawnLogged(bin, [
      '--log-format', 'json', 'dev', '--listen', '127.0.0.1:0', '--mcp-listen', '127.0.0.1:0', '--dashboard-listen', 'off', '--database-url', db, '--auth', 'api-keys',
      '--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem'), '--embedded-workers', '0', '--shutdown-grace', '1s',
    ]);
    const addr = await listeningAddr(proc, 'taskstore dev (api keys, TLS)');
    endpoint = `https://localhost:${addr.split(':').pop()}`;
    const made = execFileSync(bin, ['keys', '--database-url', db, 'create', '--tenant', 'acme', '--role', 'client', '--json'], { encoding: 'utf8' });
    token = (JSON.parse(made) as { key: string }).key;
  });
  after(async () => {
    if (proc) await stopProcess(proc);
    rmSync(dir, { recursive: true, force: true });
  });

  it('works with the key and the CA', async () => {
    const store = new GrpcTaskStore({ endpoint, token, tls: { ca } });
    try {
      const task = await store.createTask({ ttl: 60_000 }, 1, { method: 'tools/call', params: { name: 'x' } });
      assert.equal((await store.getTask(task.taskId))?.status, 'working');
    } finally {
      store.close();
    }
  });

  for (const [what, opts] of [
    ['without a key', {}],
    ['with a wrong key', { token: 'tsk_nope_nope' }],
  ] as const) {
    it(`is UNAUTHENTICATED ${what}`, async () => {
      const store = new GrpcTaskStore({ endpoint, tls: { ca }, ...opts });
      try {
        await assert.rejects(store.getTask('anything'), (e) => e instanceof TaskStoreError && e.codeName === 'UNAUTHENTICATED');
      } finally {
        store.close();
      }
    });
  }

  it('refuses a server it cannot verify', async () => {
    const store = new GrpcTaskStore({ endpoint, token, timeoutMs: 3000 });
    try {
      await assert.rejects(store.getTask('anything'), (e) => e instanceof TaskStoreError && e.codeName === 'UNAVAILABLE');
    } finally {
      store.close();
    }
  });
});
