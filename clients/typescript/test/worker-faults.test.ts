// The TypeScript worker's promises under faults (issue 25, item 2), with the
// conformance tools and real worker processes: a poison job that crashes its
// worker fails after its attempts; a worker frozen (SIGSTOP) past its lease
// is fenced when it wakes (one result); a graceful stop (SIGTERM) gives the
// task back without counting the attempt; a TypeScript and the Rust worker
// share one tool's queue (the same declaration) and each task gets its own
// result. The broker's field types (a classic queue's x-queue-version) are
// checked against the Rust worker's declaration in broker-types.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { backends, logLine, sleep, startService, type RunningService } from './helpers/service.js';
import { CONFORMANCE, CONFORMANCE_TOOLS, collectLog, dispatch, resultOf, startTsWorker, toolsListed, type TsWorker } from './helpers/ts-worker.js';

const SERVE_ARGS = ['--lease-duration', '2s', '--reaper-interval', '500ms', '--retry-backoff-base', '100ms'];

/** The worker whose log says it started `attempt` of the task (conf_sleep's first step overwrites "running on …" at once). */
async function runningOn(taskId: string, workers: TsWorker[], attempt = 1, timeoutMs = 10_000): Promise<TsWorker> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const found = workers.find((w) =>
      w.proc.logTail.some((line) => {
        try {
          const r = JSON.parse(line) as Record<string, unknown>;
          return r['message'] === 'attempt started' && r['task_id'] === taskId && r['attempt'] === attempt;
        } catch {
          return false;
        }
      }),
    );
    if (found) return found;
    if (Date.now() > until) throw new Error(`attempt ${attempt} of task ${taskId} did not start on ${workers.map((w) => w.workerId).join(' or ')}`);
    await sleep(50);
  }
}

describe('the TypeScript worker under faults', { skip: !backends().includes('serve') && 'needs serve (RabbitMQ)' }, () => {
  let service: RunningService;
  let client: TaskStoreClient;
  const workers: TsWorker[] = [];
  const start = async (id: string, args: string[] = [], module = CONFORMANCE) => {
    const w = await startTsWorker(service, module, ['--worker-id', id, ...args]);
    workers.push(w);
    return w;
  };
  before(async () => {
    service = await startService('serve', { args: SERVE_ARGS, moreTools: CONFORMANCE_TOOLS });
    client = new TaskStoreClient({ endpoint: service.endpoint });
  });
  after(async () => {
    for (const w of workers) await w.stop('SIGKILL');
    client?.close();
    await service?.stop();
  });

  it('fails a poison job (it crashes its worker every time) after its attempts; other work flows', async () => {
    let crashing = await start('ts-poison');
    const task = await dispatch(client, 'conf_crash', {}, { maxAttempts: 2 });
    for (let attempt = 1; attempt <= 2; attempt++) {
      const code = await new Promise<number | null>((ok) => crashing.proc.once('exit', (c) => ok(c)));
      assert.equal(code, 137, `the worker exits at once on attempt ${attempt}`);
      crashing = await start('ts-poison'); // restarted, as a supervisor would
    }
    const done = await resultOf(client, task.taskId, 20_000);
    assert.equal(done.status, 'failed');
    assert.match(done.task.statusMessage ?? '', /^failed after 2 attempts: .*ts-poison.* stopped renewing its lease/);
    const echo = await resultOf(client, (await dispatch(client, 'conf_echo', { text: 'still flowing' })).taskId);
    assert.equal(echo.text, 'still flowing');
    await crashing.stop();
  });

  it('fences a frozen worker: its lease expires, another worker runs the task, its late reports are refused; one result', async () => {
    const a = await start('ts-freeze-a');
    const b = await start('ts-freeze-b');
    const logs = new Map([
      [a.workerId, collectLog(a.proc)],
      [b.workerId, collectLog(b.proc)],
    ]);
    await toolsListed(service.endpoint, ['conf_sleep'], 2);
    const task = await dispatch(client, 'conf_sleep', { ms: 3000 });
    const frozen = await runningOn(task.taskId, [a, b]);
    const other = frozen === a ? b : a;
    frozen.proc.kill('SIGSTOP');
    try {
      // The lease lapses, the reaper dispatches again, the other worker claims it.
      assert.equal(await runningOn(task.taskId, [other], 2, 15_000), other);
    } finally {
      frozen.proc.kill('SIGCONT');
    }
    const done = await resultOf(client, task.taskId);
    assert.deepEqual([done.status, done.text], ['completed', 'slept 3000 ms']);
    // The woken attempt was told its lease is lost and stored nothing.
    await logLine(frozen.proc, (r) => r['task_id'] === task.taskId && r['message'] === 'attempt stopped; nothing stored', 'the frozen attempt to stop', 10_000).catch(() => undefined);
    const frozenLog = logs.get(frozen.workerId)!.filter((r) => r['task_id'] === task.taskId);
    assert.ok(
      frozenLog.some((r) => r['message'] === 'attempt stopped; nothing stored' || r['message'] === 'report refused; the task moved on without this attempt'),
      JSON.stringify(frozenLog),
    );
    const stored = [...logs.values()].flat().filter((r) => r['task_id'] === task.taskId && r['message'] === 'attempt reported');
    assert.equal(stored.length, 1, 'one attempt stored a result');
    await a.stop();
    await b.stop();
  });

  it('gives a running task back on a graceful stop (SIGTERM) after its grace: not counted, finished elsewhere', async () => {
    const a = await start('ts-term-a');
    const task = await dispatch(client, 'conf_sleep', { ms: 2500 });
    await runningOn(task.taskId, [a]);
    await sleep(300);
    const exited = new Promise<number | null>((ok) => a.proc.once('exit', (c) => ok(c)));
    a.proc.kill('SIGTERM');
    assert.equal(await exited, 0, 'a graceful stop exits 0');
    const released = await client.getTask(task.taskId);
    assert.equal(released.status, 'working');
    assert.equal(released.statusMessage, 'requeued: the worker running it (ts-term-a) shut down');
    const b = await start('ts-term-b');
    // Attempt 1 again: a shutdown does not use an attempt.
    await runningOn(task.taskId, [b], 1);
    const done = await resultOf(client, task.taskId);
    assert.deepEqual([done.status, done.text], ['completed', 'slept 2500 ms']);
    await b.stop();
  });

  it("shares a tool's queue with the Rust taskworker: both take jobs, each task gets its own result", async () => {
    // The helper's taskworker serves echo; this worker serves echo too, from the
    // queue the Rust worker declared (a redeclaration with other arguments would fail).
    const ts = await start('ts-mixed', ['--tools', 'echo', '--concurrency', '4'], './build-test/test/fixtures/worker-tools.js');
    await toolsListed(service.endpoint, ['echo'], 2);
    const tasks = await Promise.all(Array.from({ length: 30 }, (_, i) => dispatch(client, 'echo', { text: `n${i}` })));
    const results = await Promise.all(tasks.map((t) => resultOf(client, t.taskId)));
    const byTs = results.filter((r, i) => r.text === `ts echo: n${i}`).length;
    const byRust = results.filter((r, i) => r.text === `n${i}`).length;
    assert.equal(byTs + byRust, 30, results.map((r) => r.text).join(','));
    assert.ok(byTs > 0 && byRust > 0, `TypeScript ran ${byTs}, Rust ${byRust}`);
    await ts.stop();
  });
});
