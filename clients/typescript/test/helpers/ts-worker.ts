// Starts the package's own worker command (dist/worker/cli.js, as users run
// `mcp-taskstore-worker`) as a child process against a serve-mode service,
// with taskworker's flags, and waits until it consumes jobs.
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { logLine, sleep, spawnLogged, stopProcess, type LoggedProcess, type RunningService } from './service.js';

// build-test/test/helpers -> the package root
export const PKG_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const CLI = join(PKG_ROOT, 'dist', 'worker', 'cli.js');
/** The conformance tools, as docs/worker-conformance.md names the module. */
export const CONFORMANCE = './dist/worker/conformance.js';
export const CONFORMANCE_TOOLS = ['conf_echo', 'conf_tool_error', 'conf_retryable', 'conf_back_off', 'conf_crash', 'conf_sleep', 'conf_noop', 'conf_ask'];

export interface TsWorker {
  proc: LoggedProcess;
  workerId: string;
  /** SIGTERM (graceful; the process exits by itself), SIGKILL, ...: resolves once it exited. */
  stop(signal?: NodeJS.Signals): Promise<void>;
}

let seq = 0;

/** `node dist/worker/cli.js <module> --endpoint ... --amqp-url ... --queue-prefix ... --worker-id ...`, from the package root. */
export async function startTsWorker(
  service: RunningService,
  module: string,
  args: string[] = [],
  options: { env?: NodeJS.ProcessEnv; waitFor?: 'consuming' | 'nothing' } = {},
): Promise<TsWorker> {
  if (!service.shared) throw new Error('a TypeScript worker needs a serve-mode service (RabbitMQ)');
  const workerId = args.includes('--worker-id') ? args[args.indexOf('--worker-id') + 1]! : `ts-worker-${process.pid}-${seq++}`;
  const proc = spawnLogged(
    process.execPath,
    [
      CLI, module, '--endpoint', service.endpoint, '--amqp-url', service.shared.amqpUrl, '--queue-prefix', service.shared.queuePrefix,
      '--log-format', 'json', '--shutdown-grace', '1s', ...(args.includes('--worker-id') ? [] : ['--worker-id', workerId]), ...args,
    ],
    { cwd: PKG_ROOT, env: { ...process.env, ...options.env } },
  );
  if ((options.waitFor ?? 'consuming') === 'consuming') {
    try {
      await logLine(proc, (r) => r['message'] === 'consuming jobs from RabbitMQ', `worker ${workerId} to consume`, 30_000);
    } catch (err) {
      await stopProcess(proc, 'SIGKILL');
      throw err;
    }
  }
  return { proc, workerId, stop: (signal: NodeJS.Signals = 'SIGTERM') => stopProcess(proc, signal) };
}

/** Waits until ListTools shows every tool of `tools` (served by at least `workers` workers). */
export async function toolsListed(endpoint: string, tools: string[], workers = 1, timeoutMs = 20_000): Promise<void> {
  const client = new TaskStoreClient({ endpoint });
  try {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const served = new Map((await client.listTools()).map((t) => [t.name, t.workers]));
      if (tools.every((t) => (served.get(t) ?? 0) >= workers)) return;
      if (Date.now() > until) throw new Error(`ListTools did not show ${tools.join(',')} (x${workers}) within ${timeoutMs} ms`);
      await sleep(100);
    }
  } finally {
    client.close();
  }
}

let requestId = 0;

/** Creates a task dispatched to `tool` with `args`, as an MCP tools/call would. */
export function dispatch(
  client: TaskStoreClient,
  tool: string,
  args: Record<string, unknown>,
  options: { maxAttempts?: number; traceparent?: string; ttl?: number } = {},
) {
  const id = ++requestId;
  return client.createTask(
    {
      requestId: id,
      request: { jsonrpc: '2.0', id, method: 'tools/call', params: { name: tool, arguments: args } },
      ttl: options.ttl ?? 300_000,
      dispatch: { tool, ...(options.maxAttempts !== undefined && { maxAttempts: options.maxAttempts }) },
    },
    options.traceparent ? { traceparent: options.traceparent } : undefined,
  );
}

type Result = { content: Array<{ type: string; text?: string }>; isError?: boolean };

/** Waits for the task's result (status, the first text, the task). */
export async function resultOf(client: TaskStoreClient, taskId: string, timeoutMs = 30_000) {
  const r = await client.getTaskResult<Result>(taskId, { wait: true, timeoutMs });
  return { status: r.status, text: r.result.content.map((c) => c.text ?? '').join(''), isError: r.result.isError === true, task: r.task };
}

/** Collects a worker's JSON log lines from now on. */
export function collectLog(proc: LoggedProcess): Array<Record<string, unknown>> {
  const lines: Array<Record<string, unknown>> = [];
  proc.on('logline', (line: string) => {
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // not JSON
    }
  });
  return lines;
}
