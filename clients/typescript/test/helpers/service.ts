// Starts the real taskstore service for a test file: `dev` (SQLite file,
// embedded workers) or `serve` (a fresh PostgreSQL database, RabbitMQ, and
// taskworker processes). Everything it starts is stopped by `stop()`, which
// also drops what it left behind: the database, or the RabbitMQ queues and
// exchange of its queue prefix.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, rmSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connect as amqpConnect } from 'amqplib';
import { TaskStoreClient } from '@mcp-taskstore/client';

export type Backend = 'dev' | 'serve';

/** The backends to test: env TASKSTORE_TEST_BACKENDS (comma list), default both. */
export function backends(): Backend[] {
  const list = (process.env['TASKSTORE_TEST_BACKENDS'] ?? 'dev,serve').split(',').map((s) => s.trim()).filter(Boolean);
  for (const b of list) if (b !== 'dev' && b !== 'serve') throw new Error(`TASKSTORE_TEST_BACKENDS: unknown backend ${b}`);
  return list as Backend[];
}

// build-test/test/helpers -> package root -> repo root
const PKG_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const REPO_ROOT = resolve(PKG_ROOT, '..', '..');

export function binary(env: string, name: string): string {
  const path = process.env[env] ?? join(REPO_ROOT, 'target', 'debug', name);
  if (!existsSync(path)) throw new Error(`${name} binary not found at ${path}: run \`cargo build --workspace\` or set ${env}`);
  return path;
}

export interface ServiceConfig {
  /** Extra flags for `taskstore serve|dev`. */
  args?: string[];
  /** Tools the serve-mode worker fleet serves. */
  workerTools?: string;
  /** serve: a command-tools file for the worker fleet (`--command-tools`) and the names of its tools. */
  commandTools?: { file: string; tools: string[] };
  /** serve: tools of workers the test starts itself (test/helpers/ts-worker.ts), whose queues `stop()` deletes too. */
  moreTools?: string[];
}

export interface RunningService {
  backend: Backend;
  /** http://HOST:PORT */
  endpoint: string;
  /** serve only: what another replica of this service (see `startGateway`) shares with it. */
  shared?: SharedBackends;
  /** Stops the workers, the service, and drops its database or file (and its RabbitMQ queues and exchange). */
  stop(): Promise<void>;
}

let counter = 0;
function unique(): string {
  return `ts_${process.pid}_${Date.now().toString(36)}_${counter++}`;
}

export async function startService(backend: Backend, config: ServiceConfig = {}): Promise<RunningService> {
  return backend === 'dev' ? startDev(config) : startServe(config);
}

async function startDev(config: ServiceConfig): Promise<RunningService> {
  const db = join(tmpdir(), `${unique()}.db`);
  // dev serves MCP on a fixed port by default; port 0 lets test files run in parallel.
  const proc = spawnLogged(binary('TASKSTORE_BIN', 'taskstore'), [
    '--log-format', 'json', 'dev', '--listen', '127.0.0.1:0', '--mcp-listen', '127.0.0.1:0', '--dashboard-listen', 'off', '--database-url', `sqlite://${db}`,
    '--shutdown-grace', '1s', ...(config.args ?? []),
  ]);
  const addr = await listeningAddr(proc, 'taskstore dev');
  return {
    backend: 'dev',
    endpoint: `http://${addr}`,
    async stop() {
      await stopProcess(proc);
      for (const suffix of ['', '-wal', '-shm', '-journal']) rmSync(db + suffix, { force: true });
    },
  };
}

async function startServe(config: ServiceConfig): Promise<RunningService> {
  const pgBase = new URL(process.env['DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/postgres');
  const amqpUrl = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672/%2f';
  await reachable('PostgreSQL', pgBase.hostname, Number(pgBase.port || 5432), 'DATABASE_URL');
  const amqp = new URL(amqpUrl);
  await reachable('RabbitMQ', amqp.hostname, Number(amqp.port || 5672), 'AMQP_URL');

  const name = unique();
  const admin = new URL(pgBase);
  admin.pathname = '/postgres';
  psql(admin.href, `CREATE DATABASE ${name}`);
  const dbUrl = new URL(pgBase);
  dbUrl.pathname = `/${name}`;

  const builtIn = (config.workerTools ?? 'echo,sleep').split(',').map((t) => t.trim()).filter(Boolean);
  // Every tool the fleet serves, each with a queue of its own.
  const tools = [...builtIn, ...(config.commandTools?.tools ?? [])];
  const procs: ChildProcess[] = [];
  const stopAll = async () => {
    tools.push(...(config.moreTools ?? []));
    // Workers first, so none reports to a service that is going away.
    for (const p of procs.reverse()) await stopProcess(p);
    try {
      psql(admin.href, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    } finally {
      await deleteTopology(amqpUrl, name, tools);
    }
  };
  try {
    const svc = spawnLogged(binary('TASKSTORE_BIN', 'taskstore'), [
      '--log-format', 'json', 'serve', '--auth', 'none', '--listen', '127.0.0.1:0',
      '--database-url', dbUrl.href, '--amqp-url', amqpUrl, '--queue-prefix', name,
      '--shutdown-grace', '1s', ...(config.args ?? []),
    ]);
    procs.push(svc);
    const addr = await listeningAddr(svc, 'taskstore serve');
    const workerArgs = [
      '--log-format', 'json', '--endpoint', `http://${addr}`, '--amqp-url', amqpUrl, '--queue-prefix', name,
      '--tools', builtIn.length ? builtIn.join(',') : 'none', '--shutdown-grace', '1s',
      ...(config.commandTools ? ['--command-tools', config.commandTools.file] : []),
    ];
    const worker = spawnLogged(binary('TASKWORKER_BIN', 'taskworker'), workerArgs);
    procs.push(worker);
    await fleetReady(`http://${addr}`, tools);
    const startWorker = async () => {
      const another = spawnLogged(binary('TASKWORKER_BIN', 'taskworker'), workerArgs);
      procs.push(another);
      await logLine(another, (r) => r['message'] === 'consuming jobs from RabbitMQ', 'the new taskworker to consume', 30_000);
      return another;
    };
    const shared = { databaseUrl: dbUrl.href, amqpUrl, queuePrefix: name, worker, startWorker };
    return { backend: 'serve', endpoint: `http://${addr}`, shared, stop: stopAll };
  } catch (err) {
    await stopAll();
    throw err;
  }
}

export interface SharedBackends {
  databaseUrl: string;
  amqpUrl: string;
  queuePrefix: string;
  /** The taskworker process, whose log shows what its tools did. */
  worker: LoggedProcess;
  /** Starts one more taskworker like the first, once it consumes jobs; `stop()` stops it too. */
  startWorker(): Promise<LoggedProcess>;
}

export interface Gateway {
  proc: LoggedProcess;
  /** http://HOST:PORT/mcp */
  url: URL;
}

/**
 * Starts `taskstore mcp`: a replica of a serve-mode service (same database,
 * broker and queue prefix) serving MCP on `mcpListen`. Its own process, so
 * a test can kill it and start it again on the same address; the caller
 * stops it (before `service.stop()`).
 */
export async function startGateway(service: RunningService, mcpListen: string): Promise<Gateway> {
  if (!service.shared) throw new Error('a gateway needs a serve-mode service');
  const { databaseUrl, amqpUrl, queuePrefix } = service.shared;
  const proc = spawnLogged(binary('TASKSTORE_BIN', 'taskstore'), [
    '--log-format', 'json', 'mcp', '--auth', 'none', '--listen', '127.0.0.1:0', '--mcp-listen', mcpListen,
    '--database-url', databaseUrl, '--amqp-url', amqpUrl, '--queue-prefix', queuePrefix, '--shutdown-grace', '1s',
  ]);
  try {
    const { mcp } = await listening(proc, 'taskstore mcp');
    if (!mcp || mcp === 'off') throw new Error(`taskstore mcp logged mcp=${mcp}`);
    return { proc, url: new URL(mcp) };
  } catch (err) {
    await stopProcess(proc);
    throw err;
  }
}

/** A free TCP port on 127.0.0.1 (free when asked: bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.once('error', fail);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => ok(port));
    });
  });
}

// Waits until the workers have reported in, so the first dispatched job of
// a test does not also measure the fleet's start-up.
async function fleetReady(endpoint: string, tools: string[], timeoutMs = 30_000): Promise<void> {
  const client = new TaskStoreClient({ endpoint });
  try {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const served = new Set((await client.listTools()).map((t) => t.name));
      if (tools.every((t) => served.has(t))) return;
      if (Date.now() > until) throw new Error(`taskworker did not report ${tools.join(',')} within ${timeoutMs} ms`);
      await sleep(200);
    }
  } finally {
    client.close();
  }
}

// Deletes the RabbitMQ topology of a queue prefix: the quorum queue of each
// tool the workers served (only workers declare queues) and the jobs
// exchange. Best effort: a queue or exchange already gone, or a broker that
// went away, only warns, so cleanup never fails a test run.
async function deleteTopology(amqpUrl: string, prefix: string, tools: string[]): Promise<void> {
  const names = [...tools.map((t) => ({ kind: 'queue', name: `${prefix}.tool.${t}` })), { kind: 'exchange', name: `${prefix}.jobs` }];
  let conn;
  try {
    conn = await amqpConnect(amqpUrl);
  } catch (err) {
    process.emitWarning(`could not connect to RabbitMQ to delete the queues of ${prefix}: ${(err as Error).message}`);
    return;
  }
  conn.on('error', () => {}); // reported by the calls that fail
  try {
    for (const { kind, name } of names) {
      // A channel per deletion: a failed one (404) closes its channel.
      const ch = await conn.createChannel();
      ch.on('error', () => {});
      try {
        if (kind === 'queue') await ch.deleteQueue(name);
        else await ch.deleteExchange(name);
      } catch (err) {
        if ((err as { code?: number }).code !== 404) process.emitWarning(`could not delete the RabbitMQ ${kind} ${name}: ${(err as Error).message}`);
      } finally {
        await ch.close().catch(() => {});
      }
    }
  } catch (err) {
    process.emitWarning(`could not delete the RabbitMQ queues of ${prefix}: ${(err as Error).message}`);
  } finally {
    await conn.close().catch(() => {});
  }
}

function psql(url: string, sql: string): void {
  execFileSync('psql', [url, '-v', 'ON_ERROR_STOP=1', '-q', '-c', sql], { stdio: ['ignore', 'ignore', 'pipe'] });
}

function reachable(what: string, host: string, port: number, env: string): Promise<void> {
  return new Promise((ok, fail) => {
    const sock = connect({ host, port, timeout: 3000 });
    const bad = (why: string) => {
      sock.destroy();
      fail(new Error(`${what} is not reachable at ${host}:${port} (${why}); start it or point ${env} elsewhere`));
    };
    sock.once('connect', () => { sock.end(); ok(); });
    sock.once('timeout', () => bad('timeout'));
    sock.once('error', (e) => bad(e.message));
  });
}

export type LoggedProcess = ChildProcess & { logTail: string[] };

// Keeps the last lines of a child's stderr, to explain a failure, and echoes
// them when TASKSTORE_TEST_LOGS is set.
export function spawnLogged(cmd: string, args: string[], options: { cwd?: string; env?: NodeJS.ProcessEnv; detached?: boolean } = {}): LoggedProcess {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'], ...options }) as LoggedProcess;
  proc.logTail = [];
  let partial = '';
  proc.stderr!.setEncoding('utf8');
  proc.stderr!.on('data', (chunk: string) => {
    const lines = (partial + chunk).split('\n');
    partial = lines.pop()!;
    for (const line of lines) {
      proc.logTail.push(line);
      if (proc.logTail.length > 50) proc.logTail.shift();
      if (process.env['TASKSTORE_TEST_LOGS']) process.stderr.write(`[${cmd.split('/').pop()}] ${line}\n`);
      proc.emit('logline', line);
    }
  });
  return proc;
}

/** Waits for the JSON log line `"message":"listening"` and returns its addr. */
export async function listeningAddr(proc: LoggedProcess, what: string, timeoutMs = 60_000): Promise<string> {
  return (await listening(proc, what, timeoutMs)).addr;
}

/**
 * Waits for the JSON log line `"message":"listening"` and returns its `addr`
 * (gRPC, HOST:PORT) and `mcp` (the MCP URL, or "off"; absent from binaries
 * without MCP).
 */
export async function listening(proc: LoggedProcess, what: string, timeoutMs = 60_000): Promise<{ addr: string; mcp?: string }> {
  const rec = await logLine(proc, (r) => r['message'] === 'listening' && typeof r['addr'] === 'string', `${what} to log "listening"`, timeoutMs);
  return { addr: rec['addr'] as string, ...(typeof rec['mcp'] === 'string' ? { mcp: rec['mcp'] } : {}) };
}

/**
 * Waits for a JSON log line of `proc` that `matches` and returns it; fails
 * on timeout or if the process exits first. Only lines logged after the
 * call count: call it before doing what should be logged.
 */
export function logLine(
  proc: LoggedProcess,
  matches: (rec: Record<string, unknown>) => boolean,
  what: string,
  timeoutMs = 60_000,
): Promise<Record<string, unknown>> {
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => done(new Error(`waited ${timeoutMs} ms for ${what}:\n${proc.logTail.join('\n')}`)), timeoutMs);
    const onLine = (line: string) => {
      try {
        const rec = JSON.parse(line) as Record<string, unknown>;
        if (rec && typeof rec === 'object' && matches(rec)) done(null, rec);
      } catch {
        // not JSON: ignore
      }
    };
    const onExit = (code: number | null) => done(new Error(`the process exited (${code}) while waiting for ${what}:\n${proc.logTail.join('\n')}`));
    function done(err: Error | null, rec?: Record<string, unknown>) {
      clearTimeout(timer);
      proc.off('logline', onLine);
      proc.off('exit', onExit);
      if (err) fail(err);
      else ok(rec!);
    }
    proc.on('logline', onLine);
    proc.once('exit', onExit);
  });
}

/** SIGTERM, then SIGKILL after 5 s; resolves once the process is gone. */
export function stopProcess(proc: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve();
  return new Promise((ok) => {
    const killer = setTimeout(() => proc.kill('SIGKILL'), 5000);
    proc.once('exit', () => {
      clearTimeout(killer);
      ok();
    });
    proc.kill(signal);
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
