// How the TypeScript worker connects (issue 25, item 2): the queue
// arguments as the Rust worker declares them (a classic queue's
// x-queue-version sent as an AMQP long int, as lapin sends it; RabbitMQ
// refuses a redeclaration with other arguments: the control), and a service that
// demands an API key over TLS (`--token-file`, `--ca-cert`), refusing a
// worker with a wrong key.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { connect as amqpConnect } from 'amqplib';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { binary, listeningAddr, logLine, spawnLogged, startService, stopProcess, type LoggedProcess, type RunningService } from './helpers/service.js';
import { CLI, PKG_ROOT } from './helpers/ts-worker.js';

const AMQP_URL = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672/%2f';
const TOOLS_MODULE = './build-test/test/fixtures/worker-tools.js';
const hasOpenssl = (() => {
  try {
    execFileSync('openssl', ['version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

function tsWorker(endpoint: string, prefix: string, args: string[]): LoggedProcess {
  return spawnLogged(process.execPath, [CLI, TOOLS_MODULE, '--endpoint', endpoint, '--amqp-url', AMQP_URL, '--queue-prefix', prefix, '--log-format', 'json', '--tools', 'echo', ...args], {
    cwd: PKG_ROOT,
  });
}

/** Deletes a prefix's echo queue and jobs exchange. */
async function dropTopology(prefix: string): Promise<void> {
  const conn = await amqpConnect(AMQP_URL);
  try {
    const ch = await conn.createChannel();
    await ch.deleteQueue(`${prefix}.tool.echo`);
    await ch.deleteExchange(`${prefix}.jobs`);
  } finally {
    await conn.close();
  }
}

describe('the TypeScript worker declares the Rust worker\'s queue arguments, with their AMQP types', () => {
  let service: RunningService;
  const prefix = `ts_types_${process.pid}`;
  const procs: LoggedProcess[] = [];
  // dev announces no topology (no broker): both workers use their flags.
  before(async () => {
    service = await startService('dev', { args: ['--embedded-workers', '0'] });
  });
  after(async () => {
    for (const p of procs) await stopProcess(p);
    await service?.stop();
    await dropTopology(prefix).catch(() => {});
  });

  it('redeclares the classic queue (x-queue-version 2) that taskworker --queue-type classic declared', async () => {
    const rust = spawnLogged(binary('TASKWORKER_BIN', 'taskworker'), [
      '--log-format', 'json', '--endpoint', service.endpoint, '--amqp-url', AMQP_URL, '--queue-prefix', prefix, '--queue-type', 'classic', '--tools', 'echo', '--shutdown-grace', '1s',
    ]);
    procs.push(rust);
    await logLine(rust, (r) => r['message'] === 'consuming jobs from RabbitMQ', 'taskworker to consume', 30_000);
    const ts = tsWorker(service.endpoint, prefix, ['--queue-type', 'classic', '--worker-id', 'ts-classic']);
    procs.push(ts);
    await logLine(ts, (r) => r['message'] === 'consuming jobs from RabbitMQ', 'the TypeScript worker to consume from the same queue', 30_000);

    // The control: RabbitMQ checks redeclarations; other arguments are refused.
    const conn = await amqpConnect(AMQP_URL);
    try {
      const ch = await conn.createChannel();
      ch.on('error', () => {});
      await assert.rejects(
        ch.assertQueue(`${prefix}.tool.echo`, { durable: true, arguments: { 'x-queue-type': 'classic', 'x-queue-version': { '!': 'int', value: 1 } } }),
        (err: { code?: number; message: string }) => err.code === 406 && /inequivalent arg 'x-queue-version'/.test(err.message),
      );
    } finally {
      await conn.close().catch(() => {});
    }
  });
});

describe('the TypeScript worker against --auth api-keys over TLS', { skip: !hasOpenssl && 'openssl is not installed' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-worker-auth-'));
  const db = `sqlite://${join(dir, 'tasks.db')}`;
  const prefix = `ts_auth_${process.pid}`;
  const procs: LoggedProcess[] = [];
  let endpoint = '';
  let clientKey = '';

  before(async () => {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'), '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ], { stdio: 'ignore' });
    const bin = binary('TASKSTORE_BIN', 'taskstore');
    const svc = spawnLogged(bin, [
      '--log-format', 'json', 'dev', '--listen', '127.0.0.1:0', '--mcp-listen', '127.0.0.1:0', '--dashboard-listen', 'off', '--database-url', db, '--auth', 'api-keys',
      '--tls-cert', join(dir, 'cert.pem'), '--tls-key', join(dir, 'key.pem'), '--embedded-workers', '0', '--shutdown-grace', '1s',
    ]);
    procs.push(svc);
    endpoint = `https://localhost:${(await listeningAddr(svc, 'taskstore dev (api keys, TLS)')).split(':').pop()}`;
    const key = (tenant: string, role: string) =>
      (JSON.parse(execFileSync(bin, ['keys', '--database-url', db, 'create', '--tenant', tenant, '--role', role, '--json'], { encoding: 'utf8' })) as { key: string }).key;
    writeFileSync(join(dir, 'worker.key'), key('*', 'worker') + '\n');
    clientKey = key('default', 'client');
  });
  after(async () => {
    for (const p of procs.reverse()) await stopProcess(p);
    rmSync(dir, { recursive: true, force: true });
    await dropTopology(prefix).catch(() => {});
  });

  it('registers with a worker key from --token-file and the CA from --ca-cert: its tools are listed', async () => {
    const ts = tsWorker(endpoint, prefix, ['--token-file', join(dir, 'worker.key'), '--ca-cert', join(dir, 'cert.pem'), '--worker-id', 'ts-auth']);
    procs.push(ts);
    await logLine(ts, (r) => r['message'] === 'consuming jobs from RabbitMQ', 'the worker to consume', 30_000);
    const client = new TaskStoreClient({ endpoint, token: clientKey, tls: { ca: readFileSync(join(dir, 'cert.pem')) } });
    try {
      const tools = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name), ['echo']);
    } finally {
      client.close();
    }
  });

  it('stops, saying why, when the service refuses its key (TASKWORKER_TOKEN)', async () => {
    const ts = spawnLogged(process.execPath, [CLI, TOOLS_MODULE, '--endpoint', endpoint, '--ca-cert', join(dir, 'cert.pem'), '--log-format', 'json', '--amqp-url', AMQP_URL], {
      cwd: PKG_ROOT,
      env: { ...process.env, TASKWORKER_TOKEN: 'tsk_not_a_key' },
    });
    procs.push(ts);
    const code = await new Promise<number | null>((ok) => ts.once('exit', (c) => ok(c)));
    assert.equal(code, 1);
    assert.match(ts.logTail.join('\n'), /refused this worker's credentials/);
  });
});
