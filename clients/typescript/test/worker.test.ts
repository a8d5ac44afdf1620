// The TypeScript fleet worker (issue 25, item 2), as users run it: the
// package's `mcp-taskstore-worker` command (dist/worker/cli.js) in its own
// process, serving the conformance tools (docs/worker-conformance.md) of
// ./dist/worker/conformance.js, against a real `taskstore serve`
// (PostgreSQL, RabbitMQ under a queue prefix of this file's own). The
// service runs with a 2 s lease and a 0.5 s reaper, retries after 100 ms.
// Faults (crashes, SIGSTOP, SIGTERM, a mixed fleet) are in
// worker-faults.test.ts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, it } from 'node:test';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { z } from 'zod';
import { TaskStoreClient, type TaskStoreError } from '@mcp-taskstore/client';
import { defineTool, silent, Worker } from '@mcp-taskstore/client/worker';
import { backends, binary, logLine, sleep, startService, type RunningService } from './helpers/service.js';
import { CONFORMANCE, CONFORMANCE_TOOLS, collectLog, dispatch, resultOf, startTsWorker, toolsListed, type TsWorker } from './helpers/ts-worker.js';

const SERVE_ARGS = ['--lease-duration', '2s', '--reaper-interval', '500ms', '--retry-backoff-base', '100ms'];
const AMQP_URL = process.env['AMQP_URL'] ?? 'amqp://guest:guest@127.0.0.1:5672/%2f';
const PROTO_DIR = join(dirname(fileURLToPath(import.meta.resolve('@mcp-taskstore/client'))), 'proto');

type Unary = (req: unknown, callback: (err: grpc.ServiceError | null, res: unknown) => void) => void;

/** The service's TaskStore and TaskExecution as plain gRPC, for what the package's client does not show (a tool's limits). */
function rawClients(endpoint: string) {
  const options = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: false, includeDirs: [PROTO_DIR] };
  const pkg = grpc.loadPackageDefinition(protoLoader.loadSync(['mcp/tasks/v1/task_store.proto', 'mcp/tasks/v1/execution.proto'], options)) as unknown as {
    mcp: { tasks: { v1: { TaskStore: grpc.ServiceClientConstructor; TaskExecution: grpc.ServiceClientConstructor } } };
  };
  const address = new URL(endpoint).host;
  const store = new pkg.mcp.tasks.v1.TaskStore(address, grpc.credentials.createInsecure());
  const execution = new pkg.mcp.tasks.v1.TaskExecution(address, grpc.credentials.createInsecure());
  return {
    store,
    execution,
    call<T>(client: grpc.Client, method: string, req: unknown): Promise<T> {
      const fn = (client as unknown as Record<string, Unary>)[method]!;
      return new Promise<T>((resolve, reject) => fn.call(client, req, (err, res) => (err ? reject(err) : resolve(res as T))));
    },
    close() {
      store.close();
      execution.close();
    },
  };
}

describe('the TypeScript worker (mcp-taskstore-worker) with the conformance tools', { skip: !backends().includes('serve') && 'needs serve (RabbitMQ)' }, () => {
  let service: RunningService;
  let client: TaskStoreClient;
  let worker: TsWorker;
  let log: Array<Record<string, unknown>>;
  let metricsAddr = '';
  before(async () => {
    service = await startService('serve', { args: SERVE_ARGS, moreTools: [...CONFORMANCE_TOOLS, 'trace_probe', 'ask_probe', 'stubborn', 'ts_limited', 'ts_unlimited'] });
    client = new TaskStoreClient({ endpoint: service.endpoint });
    worker = await startTsWorker(service, CONFORMANCE, ['--concurrency', '2', '--worker-id', 'ts-conf', '--metrics-listen', '127.0.0.1:0']);
    log = collectLog(worker.proc);
    const logged = worker.proc.logTail.map((l) => JSON.parse(l) as Record<string, unknown>).find((r) => r['message'] === 'serving metrics on /metrics');
    metricsAddr = (logged ?? (await logLine(worker.proc, (r) => r['message'] === 'serving metrics on /metrics', 'the metrics address', 5000)))['addr'] as string;
    await toolsListed(service.endpoint, CONFORMANCE_TOOLS);
  });
  after(async () => {
    await worker?.stop();
    client?.close();
    await service?.stop();
  });

  it('reports its tools with their descriptions: ListTools and `taskstore status` show them', async () => {
    const tools = new Map((await client.listTools()).map((t) => [t.name, t]));
    for (const name of CONFORMANCE_TOOLS) assert.ok(tools.has(name), name);
    const echo = tools.get('conf_echo')!;
    assert.equal(echo.slots, 2);
    assert.equal(echo.description?.description, 'Returns its text');
    assert.equal(echo.description?.taskSupport, 'optional');
    // The zod shape, converted as the SDK's tools/list converts it.
    assert.deepEqual((echo.description?.inputSchema['properties'] as Record<string, unknown>)['text'], { type: 'string' });
    assert.deepEqual(echo.description?.inputSchema['required'], ['text']);
    const status = execFileSync(binary('TASKSTORE_BIN', 'taskstore'), ['status', '--endpoint', service.endpoint], { encoding: 'utf8' });
    // Its row: the tools, every tenant (`*`), consuming, 2 slots.
    assert.match(status, /ts-conf\s+conf_ask,conf_back_off,conf_crash,conf_echo,conf_noop,conf_retryable,conf_sleep,conf_tool_error\s+\*\s+yes\s+2\s/);
  });

  it('a result; a tool error (failed, one attempt, the result stored)', async () => {
    const echo = await resultOf(client, (await dispatch(client, 'conf_echo', { text: 'hello' })).taskId);
    assert.deepEqual([echo.status, echo.text], ['completed', 'hello']);

    const failed = await resultOf(client, (await dispatch(client, 'conf_tool_error', {})).taskId);
    assert.deepEqual([failed.status, failed.text, failed.isError, failed.task.statusMessage], ['failed', 'tool error', true, 'tool error']);

    const before = Date.now() * 1000;
    const noop = await resultOf(client, (await dispatch(client, 'conf_noop', { n: 1 })).taskId);
    assert.ok(Number(noop.text) >= before - 1000 && Number(noop.text) <= Date.now() * 1000, `conf_noop started at ${noop.text} µs`);
  });

  it('arguments its schema refuses: refused by the service while the worker serves the tool, failed by the worker otherwise', async () => {
    // The service checks them against the schema the worker described.
    await assert.rejects(dispatch(client, 'conf_echo', { text: 5 }), (err: TaskStoreError) => {
      assert.equal(err.codeName, 'INVALID_ARGUMENT');
      assert.match(err.message, /arguments\.text/);
      return true;
    });
    // A task created while no worker served the tool (the service then
    // takes any arguments) meets the worker's own check.
    const unserved = await startService('serve', { workerTools: '', moreTools: CONFORMANCE_TOOLS });
    const fresh = new TaskStoreClient({ endpoint: unserved.endpoint });
    let late: TsWorker | undefined;
    try {
      const task = await dispatch(fresh, 'conf_echo', { text: 5 });
      late = await startTsWorker(unserved, CONFORMANCE);
      const bad = await resultOf(fresh, task.taskId);
      assert.equal(bad.status, 'failed');
      assert.match(bad.text, /^Input validation error: Invalid arguments for tool conf_echo: .*text/);
    } finally {
      await late?.stop();
      fresh.close();
      await unserved.stop();
    }
  });

  it('a retryable failure is retried until it succeeds, each attempt counted', async () => {
    const task = await dispatch(client, 'conf_retryable', { fail_times: 2 }, { maxAttempts: 3 });
    const seen: string[] = [];
    for await (const t of client.watchTask(task.taskId, { timeoutMs: 30_000 })) if (t.statusMessage) seen.push(t.statusMessage);
    const done = await resultOf(client, task.taskId);
    assert.deepEqual([done.status, done.text], ['completed', 'succeeded on attempt 3']);
    assert.ok(seen.some((m) => /^attempt 1 of 3 failed: failing attempt 1; retrying in/.test(m)), seen.join('\n'));
  });

  it("a tool's declared concurrency limit reaches the service in the heartbeat; what defineTool refuses, the service refuses too", async () => {
    const limited = new Worker(
      [
        defineTool(
          'ts_limited',
          { inputSchema: { customer_id: z.string() }, concurrency: { max: 3, key: 'tenant, arguments.customer_id' }, rate: { starts: 20, perMs: 1500, key: 'tenant' } },
          ({ customer_id }) => customer_id,
        ),
        defineTool('ts_unlimited', {}, () => 'ok'),
      ],
      { endpoint: service.endpoint, amqpUrl: AMQP_URL, workerId: 'ts-limits', concurrency: 1, shutdownGraceMs: 1000, logger: silent },
    );
    const raw = rawClients(service.endpoint);
    try {
      await limited.whenReady();
      const { tools } = await raw.call<{ tools: Array<{ name: string; description: { concurrency: unknown; rate: unknown } | null }> }>(raw.store, 'listTools', {});
      const described = new Map(tools.map((t) => [t.name, t.description]));
      // Kept by the service, its key as the service normalises it.
      assert.deepEqual(described.get('ts_limited')?.concurrency, { max: 3, key: 'tenant,arguments.customer_id' });
      assert.equal(described.get('ts_unlimited')?.concurrency, null);
      assert.deepEqual(described.get('ts_limited')?.rate, { starts: 20, per: { seconds: 1, nanos: 500_000_000 }, key: 'tenant' });
      assert.equal(described.get('ts_unlimited')?.rate, null);
      // Limits defineTool refuses, sent as they are: the service refuses the heartbeat.
      for (const concurrency of [{ max: 0, key: '' }, { max: 10_001, key: '' }, { max: 3, key: 'customer_id' }, { max: 3, key: `tenant${' '.repeat(251)}` }, { max: 3, key: Array(9).fill('tool').join(',') }]) {
        assert.throws(() => defineTool('ts_limited', { concurrency }, () => ''), JSON.stringify(concurrency));
        const description = { name: 'ts_limited', inputSchemaJson: '{"type":"object"}', taskSupport: 'TASK_SUPPORT_OPTIONAL', concurrency };
        await assert.rejects(raw.call(raw.execution, 'heartbeat', { workerId: 'ts-limits-raw', tools: ['ts_limited'], slots: 1, descriptions: [description] }), (err: { code?: number; details?: string }) => {
          assert.equal(err.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(concurrency));
          assert.match(err.details ?? '', /concurrency/);
          return true;
        });
      }
      // And rates.
      for (const rate of [{ starts: 0, perMs: 1000 }, { starts: 100_001, perMs: 1000 }, { starts: 5, perMs: 1 }, { starts: 5, perMs: 86_400_001 }]) {
        assert.throws(() => defineTool('ts_limited', { rate }, () => ''), JSON.stringify(rate));
        const wire = { starts: rate.starts, per: { seconds: Math.floor(rate.perMs / 1000), nanos: (rate.perMs % 1000) * 1_000_000 }, key: '' };
        const description = { name: 'ts_limited', inputSchemaJson: '{"type":"object"}', taskSupport: 'TASK_SUPPORT_OPTIONAL', rate: wire };
        await assert.rejects(raw.call(raw.execution, 'heartbeat', { workerId: 'ts-limits-raw', tools: ['ts_limited'], slots: 1, descriptions: [description] }), (err: { code?: number; details?: string }) => {
          assert.equal(err.code, grpc.status.INVALID_ARGUMENT, JSON.stringify(rate));
          assert.match(err.details ?? '', /rate/);
          return true;
        });
      }
    } finally {
      raw.close();
      await limited.stop();
    }
  });

  it('progress reaches a watcher; a cancellation stops the tool within a second and frees its slot', async () => {
    const short = await dispatch(client, 'conf_sleep', { ms: 600 });
    const steps: string[] = [];
    for await (const t of client.watchTask(short.taskId, { timeoutMs: 20_000 })) if (t.statusMessage?.startsWith('step')) steps.push(t.statusMessage);
    assert.ok(steps.length >= 3, steps.join(','));
    const numbers = steps.map((m) => Number(m.slice('step '.length)));
    assert.deepEqual(numbers, [...numbers].sort((x, y) => x - y), 'steps only go up');
    assert.equal((await resultOf(client, short.taskId)).text, 'slept 600 ms');

    const long = await dispatch(client, 'conf_sleep', { ms: 60_000 });
    await logLine(worker.proc, (r) => r['message'] === 'attempt started' && r['task_id'] === long.taskId, 'the long sleep to start', 10_000);
    await sleep(500);
    const stopped = logLine(worker.proc, (r) => r['message'] === 'attempt stopped; nothing stored' && r['task_id'] === long.taskId, 'the tool to stop', 5000);
    const cancelledAt = Date.now();
    await client.cancelTask(long.taskId);
    const line = await stopped;
    const tookMs = Date.parse(line['timestamp'] as string) - cancelledAt;
    assert.ok(tookMs < 1000, `the tool stopped ${tookMs} ms after the cancellation`);
    assert.equal(line['reason'], 'the task was cancelled');
    // Its progress stopped with it.
    const after = (await client.getTask(long.taskId)).statusMessage;
    await sleep(300);
    assert.equal((await client.getTask(long.taskId)).statusMessage, after);
    // Both slots are free again: two sleeps run at once.
    const [a, b] = [await dispatch(client, 'conf_sleep', { ms: 300 }), await dispatch(client, 'conf_sleep', { ms: 300 })];
    const started = Date.now();
    await Promise.all([resultOf(client, a.taskId), resultOf(client, b.taskId)]);
    assert.ok(Date.now() - started < 2000);
  });

  it('a question is asked (input_required) and its answer returned to the tool', async () => {
    const task = await dispatch(client, 'conf_ask', {});
    let asked = await client.getTask(task.taskId);
    for (let i = 0; asked.status !== 'input_required' && i < 100; i++) {
      await sleep(100);
      asked = await client.getTask(task.taskId);
    }
    assert.equal(asked.status, 'input_required');
    const [question] = await client.listInputRequests(task.taskId);
    assert.equal(question?.key, 'confirm');
    assert.deepEqual(question?.request, { method: 'elicitation/create', params: { message: 'Proceed?', requestedSchema: { type: 'object', properties: {} } } });
    const answered = await client.answerInputRequests(task.taskId, { confirm: { action: 'accept', content: {} } });
    assert.deepEqual(answered.taken, ['confirm']);
    const done = await resultOf(client, task.taskId);
    assert.deepEqual([done.status, done.text], ['completed', 'answered accept']);
  });

  it('runs at most --concurrency attempts at once, and takes jobs as slots free', async () => {
    const tasks = await Promise.all([1, 2, 3, 4, 5].map(() => dispatch(client, 'conf_sleep', { ms: 400 })));
    const ids = new Set(tasks.map((t) => t.taskId));
    await Promise.all(tasks.map((t) => resultOf(client, t.taskId)));
    let running = 0;
    let most = 0;
    for (const rec of log) {
      if (!ids.has(rec['task_id'] as string)) continue;
      if (rec['message'] === 'attempt started') most = Math.max(most, ++running);
      if (rec['message'] === 'attempt reported') running--;
    }
    assert.equal(most, 2);
  });

  it("continues the job's trace: the attempt is a child of the trace the task was created in", async () => {
    const probe = await startTsWorker(service, './build-test/test/fixtures/worker-tools.js', ['--tools', 'trace_probe']);
    try {
      const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
      const task = await dispatch(client, 'trace_probe', {}, { traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
      const { text } = await resultOf(client, task.taskId);
      const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(text);
      assert.ok(m, text);
      assert.equal(m[1], traceId, 'the same trace');
      assert.notEqual(m[2], '00f067aa0ba902b7', "a span of the worker's own");
    } finally {
      await probe.stop();
    }
  });

  it('parks a question that waits past --park-after (the slot given back); the answer runs the task again', async () => {
    const probe = await startTsWorker(service, './build-test/test/fixtures/worker-tools.js', ['--tools', 'ask_probe', '--park-after', '1s']);
    const probeLog = collectLog(probe.proc);
    try {
      const task = await dispatch(client, 'ask_probe', {});
      await logLine(probe.proc, (r) => r['message'] === 'attempt reported' && r['task_id'] === task.taskId && r['outcome'] === 'parked', 'the attempt to park', 10_000);
      const parked = await client.getTask(task.taskId);
      assert.equal(parked.status, 'input_required');
      await client.answerInputRequests(task.taskId, { go: { action: 'accept', content: {} } });
      const done = await resultOf(client, task.taskId);
      // Run again, and the park used up no attempt.
      assert.equal(done.text, 'answered accept on attempt 1');
      assert.equal(probeLog.filter((r) => r['message'] === 'attempt started' && r['task_id'] === task.taskId).length, 2);
    } finally {
      await probe.stop();
    }
  });

  it('leaves a tool deaf to its signal behind after --stop-grace: its slot is free, nothing it reports counts', async () => {
    const probe = await startTsWorker(service, './build-test/test/fixtures/worker-tools.js', ['--tools', 'stubborn', '--stop-grace', '500ms', '--concurrency', '1']);
    try {
      const deaf = await dispatch(client, 'stubborn', { ms: 3000 });
      await logLine(probe.proc, (r) => r['message'] === 'attempt started' && r['task_id'] === deaf.taskId, 'the deaf tool to start', 10_000);
      const stopped = logLine(probe.proc, (r) => r['message'] === 'attempt stopped; nothing stored' && r['task_id'] === deaf.taskId, 'the attempt to end without it', 5000);
      const cancelledAt = Date.now();
      await client.cancelTask(deaf.taskId);
      const line = await stopped;
      const tookMs = Date.parse(line['timestamp'] as string) - cancelledAt;
      assert.ok(tookMs >= 400 && tookMs < 1500, `ended ${tookMs} ms after the cancellation (stop grace 500 ms)`);
      // The one slot takes the next job while the deaf tool still runs.
      const next = await dispatch(client, 'stubborn', { ms: 100 });
      assert.equal((await resultOf(client, next.taskId, 10_000)).text, 'finished anyway');
      await sleep(2500); // the deaf tool returns and reports: neither counts
      const cancelled = await client.getTask(deaf.taskId);
      assert.deepEqual([cancelled.status, cancelled.statusMessage], ['cancelled', undefined]);
    } finally {
      await probe.stop();
    }
  });

  it('serves metrics (taskworker names) and probes on --metrics-listen', async () => {
    const base = `http://${metricsAddr}`;
    const text = await (await fetch(`${base}/metrics`)).text();
    assert.match(text, /^taskworker_slots 2$/m);
    assert.match(text, /^taskworker_jobs_total\{result="claimed",tool="conf_echo"\} \d+$/m);
    assert.match(text, /^taskworker_attempts_total\{outcome="completed",tool="conf_sleep"\} \d+$/m);
    assert.equal((await fetch(`${base}/readyz`)).status, 200);
    assert.equal((await fetch(`${base}/livez`)).status, 200);
  });
});
