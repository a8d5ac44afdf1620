// The typed client of the whole TaskStore API, on each backend.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { GrpcTaskStore, TaskStoreClient, TaskStoreError, isNotFound, type StoredTask } from '@mcp-taskstore/client';
import { backends, sleep, startService, type RunningService } from './helpers/service.js';

const call = (name: string, args: Record<string, unknown>, id: number | string = 1) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args },
});

const codeOf = (err: unknown) => (err instanceof TaskStoreError ? err.codeName : String(err));

for (const backend of backends()) {
  describe(`TaskStoreClient on taskstore ${backend}`, () => {
    let service: RunningService;
    let client: TaskStoreClient;
    // Each case works in its own session so listings stay predictable.
    const session = () => `client-${randomUUID()}`;

    before(async () => {
      service = await startService(backend);
      client = new TaskStoreClient({ endpoint: service.endpoint, timeoutMs: 5000 });
    });
    after(async () => {
      client?.close();
      await service?.stop();
    });

    it('creates a task under a caller-chosen id, once', async () => {
      const taskId = `order-${randomUUID()}`;
      const task = await client.createTask({ taskId, requestId: 'req-1', request: call('x', {}) });
      assert.equal(task.taskId, taskId);
      assert.equal(task.tool, 'x');
      await assert.rejects(client.createTask({ taskId, requestId: 2, request: call('x', {}) }), (e) => codeOf(e) === 'ALREADY_EXISTS');
    });

    it('answers a retried create that carries an idempotency key with the first task', async () => {
      const idempotencyKey = `key-${randomUUID()}`;
      const first = await client.createTask({ requestId: 1, request: call('x', { n: 1 }), idempotencyKey });
      const again = await client.createTask({ requestId: 2, request: call('x', { n: 1 }), idempotencyKey });
      assert.equal(again.taskId, first.taskId);
      await assert.rejects(
        client.createTask({ requestId: 3, request: call('x', { n: 2 }), idempotencyKey }),
        (e) => codeOf(e) === 'FAILED_PRECONDITION',
      );
      // Through the SDK's TaskStore: the key in the request's _meta.
      const store = new GrpcTaskStore({ endpoint: service.endpoint });
      try {
        const request = { method: 'tools/call', params: { name: 'x', arguments: {}, _meta: { 'mcp-taskstore/idempotency-key': `sdk-${idempotencyKey}` } } };
        const viaSdk = await store.createTask({ ttl: 60_000 }, 4, request);
        const retried = await store.createTask({ ttl: 60_000 }, 5, request);
        assert.equal(retried.taskId, viaSdk.taskId);
        await assert.rejects(
          store.createTask({ ttl: 60_000 }, 6, { method: 'tools/call', params: { name: 'x', _meta: { 'mcp-taskstore/idempotency-key': 7 } } }),
          TypeError,
        );
      } finally {
        store.close();
      }
    });

    it('starts a dispatched task no sooner than asked, from its parameters or the call\'s _meta', async () => {
      const asked = Date.now();
      const task = await client.createTask({ requestId: 1, request: call('echo', { text: 'later' }), dispatch: { startAfterMs: 1500 } });
      assert.match(task.statusMessage ?? '', /^starts at /);
      const { status } = await client.getTaskResult(task.taskId, { wait: true, timeoutMs: 30_000 });
      assert.equal(status, 'completed');
      assert.ok(Date.now() - asked >= 1500, 'ran early');
      const store = new GrpcTaskStore({ endpoint: service.endpoint });
      try {
        const at = new Date(Date.now() + 60_000).toISOString();
        const request = { method: 'tools/call', params: { name: 'echo', arguments: {}, _meta: { 'mcp-taskstore/start-at': at } } };
        const waiting = await store.createTask({ ttl: 120_000, context: { dispatch: { tool: 'echo' } } }, 2, request);
        assert.equal((await client.getTask(waiting.taskId)).statusMessage, `starts at ${at}`);
        await client.cancelTask(waiting.taskId);
        await assert.rejects(client.createTask({ requestId: 3, request: call('echo', {}), dispatch: { startAt: new Date(0) } }), (e) => codeOf(e) === 'INVALID_ARGUMENT');
      } finally {
        store.close();
      }
    });

    it('dispatches with a priority in range, and refuses one out of it', async () => {
      const task = await client.createTask({ requestId: 1, request: call('echo', { text: 'urgent' }), dispatch: { priority: 9 } });
      assert.equal((await client.getTaskResult(task.taskId, { wait: true, timeoutMs: 30_000 })).status, 'completed');
      await assert.rejects(client.createTask({ requestId: 2, request: call('echo', {}), dispatch: { priority: 10 } }), (e) => codeOf(e) === 'INVALID_ARGUMENT');
    });

    it('grants the poll interval asked for, within the service minimum', async () => {
      const asked = await client.createTask({ requestId: 1, request: call('x', {}), pollInterval: 2500 });
      assert.equal(asked.pollInterval, 2500);
      const tooFast = await client.createTask({ requestId: 2, request: call('x', {}), pollInterval: 1 });
      assert.ok(tooFast.pollInterval! >= 100, `clamped to the minimum, got ${tooFast.pollInterval}`);
      const unasked = await client.createTask({ requestId: 3, request: call('x', {}) });
      assert.equal(unasked.pollInterval, 1000);
    });

    it('settles ttl null at the service maximum when it has one', async () => {
      // startService runs with the service defaults: max ttl 7 d.
      const task = await client.createTask({ requestId: 1, request: call('x', {}), ttl: null });
      assert.equal(task.ttl, 7 * 24 * 3_600_000);
    });

    it('dispatches a tools/call to the fleet and waits for its result', async () => {
      const task = await client.createTask({ requestId: 7, request: call('echo', { text: 'dispatched hi' }), dispatch: {} });
      assert.equal(task.tool, 'echo');
      const { status, result, task: done } = await client.getTaskResult<{ content: Array<{ text: string }> }>(task.taskId, { wait: true, timeoutMs: 30_000 });
      assert.equal(status, 'completed');
      assert.equal(done.status, 'completed');
      assert.match(result.content.map((c) => c.text).join(''), /dispatched hi/);
    });

    it('lets an SDK tool handler dispatch through GrpcTaskStore (context.dispatch)', async () => {
      const store = new GrpcTaskStore({ endpoint: service.endpoint });
      try {
        const task = await store.createTask(
          { ttl: 60_000, context: { dispatch: { tool: 'echo' } } },
          5,
          { method: 'tools/call', params: { name: 'my-echo', arguments: { text: 'via context' } } },
        );
        const { result } = await client.getTaskResult<{ content: Array<{ text: string }> }>(task.taskId, { wait: true, timeoutMs: 30_000 });
        assert.match(result.content.map((c) => c.text).join(''), /via context/);
      } finally {
        store.close();
      }
    });

    it('watches a task through its changes until it is terminal', async () => {
      const sessionId = session();
      const task = await client.createTask({ sessionId, requestId: 1, request: call('noop', {}) });
      const seen: StoredTask[] = [];
      const watching = (async () => {
        for await (const t of client.watchTask(task.taskId, { sessionId })) seen.push(t);
      })();
      await sleep(200);
      await client.updateTaskStatus({ taskId: task.taskId, sessionId, status: 'working', statusMessage: 'half way' });
      await sleep(200);
      await client.storeTaskResult({ taskId: task.taskId, sessionId, status: 'completed', result: { content: [] } });
      await watching; // the stream ends by itself at the terminal status
      assert.equal(seen[0]!.status, 'working');
      assert.ok(seen.some((t) => t.statusMessage === 'half way'), 'saw the progress message');
      assert.equal(seen.at(-1)!.status, 'completed');
    });

    it('stops a watch when the caller aborts it', async () => {
      const task = await client.createTask({ requestId: 1, request: call('noop', {}) });
      const ac = new AbortController();
      const got: string[] = [];
      setTimeout(() => ac.abort(), 300);
      await assert.rejects(
        (async () => {
          for await (const t of client.watchTask(task.taskId, { signal: ac.signal })) got.push(t.status);
        })(),
        (e) => codeOf(e) === 'CANCELLED',
      );
      assert.deepEqual(got, ['working']);
    });

    it('bounds a waiting result by its deadline', async () => {
      const task = await client.createTask({ requestId: 1, request: call('noop', {}) });
      const started = Date.now();
      // The service sees the deadline and answers "not ready" just before it;
      // had it not, grpc-js would end the call with DEADLINE_EXCEEDED.
      await assert.rejects(
        client.getTaskResult(task.taskId, { wait: true, timeoutMs: 400 }),
        (e) => ['FAILED_PRECONDITION', 'DEADLINE_EXCEEDED'].includes(codeOf(e)),
      );
      assert.ok(Date.now() - started < 5000);
    });

    it('cancels idempotently and refuses results afterwards', async () => {
      const task = await client.createTask({ requestId: 1, request: call('x', {}) });
      assert.equal((await client.cancelTask(task.taskId)).status, 'cancelled');
      assert.equal((await client.cancelTask(task.taskId)).status, 'cancelled');
      // The refusal says why, for programs: a worker whose report is refused
      // this way stops its attempt (worker/report.ts, stopOfRefusal).
      const saysCancelled = (e: unknown) => {
        assert.ok(e instanceof TaskStoreError, String(e));
        assert.deepEqual([e.codeName, e.reason, e.metadata], ['FAILED_PRECONDITION', 'FENCE_TERMINAL', { status: 'cancelled' }]);
        return true;
      };
      await assert.rejects(client.storeTaskResult({ taskId: task.taskId, status: 'completed', result: {} }), saysCancelled);
      await assert.rejects(client.updateTaskStatus({ taskId: task.taskId, status: 'working', statusMessage: 'still going' }), saysCancelled);
      await assert.rejects(client.getTaskResult(task.taskId), (e) => codeOf(e) === 'FAILED_PRECONDITION');
    });

    it('deletes a task of its own session only', async () => {
      const sessionId = session();
      const task = await client.createTask({ sessionId, requestId: 1, request: call('x', {}) });
      await assert.rejects(client.deleteTask(task.taskId, { sessionId: `${sessionId}-other` }), isNotFound);
      await client.deleteTask(task.taskId, { sessionId });
      await assert.rejects(client.getTask(task.taskId), isNotFound);
      await assert.rejects(client.deleteTask(task.taskId), isNotFound);
    });

    it('lists by session, status and tool, a page at a time', async () => {
      const sessionId = session();
      const a = await client.createTask({ sessionId, requestId: 1, request: call('alpha', {}) });
      const b = await client.createTask({ sessionId, requestId: 2, request: call('beta', {}) });
      const c = await client.createTask({ sessionId, requestId: 3, request: call('alpha', {}) });
      await client.updateTaskStatus({ taskId: b.taskId, sessionId, status: 'input_required' });
      const ids = (ts: StoredTask[]) => ts.map((t) => t.taskId);

      const first = await client.listTasks({ sessionId, pageSize: 2 });
      assert.deepEqual(ids(first.tasks), [a.taskId, b.taskId]);
      const second = await client.listTasks({ sessionId, pageSize: 2, cursor: first.nextCursor! });
      assert.deepEqual(ids(second.tasks), [c.taskId]);
      assert.equal(second.nextCursor, undefined);

      assert.deepEqual(ids((await client.listTasks({ sessionId, statuses: ['input_required'] })).tasks), [b.taskId]);
      assert.deepEqual(ids((await client.listTasks({ sessionId, tool: 'alpha' })).tasks), [a.taskId, c.taskId]);
    });

    it('lists the tools the fleet serves', async () => {
      // Workers report every few seconds; a fresh fleet may need one round.
      for (let i = 0; ; i++) {
        const tools = await client.listTools();
        const echo = tools.find((t) => t.name === 'echo');
        if (echo) {
          assert.ok(echo.workers >= 1);
          assert.ok(Date.parse(echo.lastSeenAt) > 0);
          return;
        }
        if (i > 30) assert.fail(`no worker serves echo: ${JSON.stringify(tools)}`);
        await sleep(500);
      }
    });

    it('reports a missing task as NOT_FOUND', async () => {
      await assert.rejects(client.getTask('missing-task'), (e) => isNotFound(e) && e instanceof Error && /GetTask: NOT_FOUND/.test(e.message));
    });
  });
}
