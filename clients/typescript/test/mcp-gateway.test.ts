// The MCP endpoint of taskstore itself (`taskstore mcp`, the gateway tier),
// driven by a real SDK 1.x Client over Streamable HTTP (revision 2025-11-25):
// it lists the fleet's tools, calls them synchronously and as tasks, polls,
// fetches results, lists, cancels a running tool (and the worker sees it),
// and keeps serving the same session's tasks after the gateway process is
// killed and started again on the same port. PostgreSQL + RabbitMQ + a
// taskworker (serve mode); the gateway is a separate replica.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  McpError,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type GetTaskResult,
} from '@modelcontextprotocol/sdk/types.js';
import {
  freePort,
  logLine,
  sleep,
  startGateway,
  startService,
  stopProcess,
  type Gateway,
  type RunningService,
} from './helpers/service.js';

// Every SDK request gets a bound, so a server that never answers fails the
// test instead of hanging it (the SDK's default is 60 s).
const REQUEST = { timeout: 20_000 };
const CASE = { timeout: 60_000 };

const textOf = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

const isInvalidParams = (e: unknown) => e instanceof McpError && e.code === ErrorCode.InvalidParams;

async function startTask(client: Client, name: string, args: Record<string, unknown>, ttl = 120_000) {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: { ttl } } },
    CreateTaskResultSchema,
    REQUEST,
  );
  return created.task;
}

// Polls tasks/get at the interval the server advises until `done` holds.
async function pollTask(client: Client, taskId: string, done: (t: GetTaskResult) => boolean, what: string, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const task = await client.experimental.tasks.getTask(taskId, REQUEST);
    if (done(task)) return task;
    if (Date.now() > until) throw new Error(`task ${taskId} is ${task.status} (${task.statusMessage ?? 'no message'}), wanted ${what}`);
    await sleep(Math.min(task.pollInterval ?? 200, 1000));
  }
}

const waitForStatus = (client: Client, taskId: string, want: string) => pollTask(client, taskId, (t) => t.status === want, want);

async function listAll(client: Client): Promise<Map<string, string>> {
  const listed = new Map<string, string>();
  let cursor: string | undefined;
  do {
    const page = await client.experimental.tasks.listTasks(cursor, REQUEST);
    for (const t of page.tasks) listed.set(t.taskId, t.status);
    cursor = page.nextCursor;
  } while (cursor);
  return listed;
}

describe('taskstore mcp (the gateway) with the TypeScript SDK client', () => {
  let service: RunningService;
  let gateway: Gateway;
  let mcpListen = '';
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  before(async () => {
    service = await startService('serve', { workerTools: 'echo,sleep' });
    // A fixed port, so the gateway can be started again where the client points.
    mcpListen = `127.0.0.1:${await freePort()}`;
    gateway = await startGateway(service, mcpListen);
    client = new Client({ name: 'taskstore-gateway-test', version: '1.0.0' });
    transport = new StreamableHTTPClientTransport(gateway.url);
    await client.connect(transport, REQUEST);
  });
  after(async () => {
    await client?.close();
    if (gateway) await stopProcess(gateway.proc);
    await service?.stop();
  });

  // Shared by the cases below, which run in order.
  let echoTaskId = '';
  let sleptId = '';
  let cancelledId = '';

  it('initializes a session with task capabilities', () => {
    // The session id scopes every task below; the SDK sends it from now on.
    assert.match(transport.sessionId ?? '', /^[0-9a-f]{32}$/);
    const caps = client.getServerCapabilities();
    assert.ok(caps?.tasks?.requests?.tools?.call, 'tasks.requests.tools.call');
    assert.ok(caps?.tasks?.list, 'tasks.list');
    assert.ok(caps?.tasks?.cancel, 'tasks.cancel');
  });

  it("lists the fleet's tools with their task support", CASE, async () => {
    const { tools } = await client.listTools(undefined, REQUEST);
    const byName = new Map(tools.map((t) => [t.name, t]));
    for (const name of ['echo', 'sleep']) {
      assert.equal(byName.get(name)?.execution?.taskSupport, 'optional', `${name}.execution.taskSupport`);
      assert.equal(byName.get(name)?.inputSchema.type, 'object');
    }
  });

  it('calls a tool synchronously', CASE, async () => {
    const result = (await client.callTool({ name: 'echo', arguments: { text: 'hello' } }, CallToolResultSchema, REQUEST)) as CallToolResult;
    assert.equal(textOf(result), 'hello');
    assert.notEqual(result.isError, true);
  });

  it("streams a call made as a task to its result (the SDK's callToolStream)", CASE, async () => {
    const kinds: string[] = [];
    let result: CallToolResult | undefined;
    for await (const msg of client.experimental.tasks.callToolStream(
      { name: 'echo', arguments: { text: 'as a task' } },
      CallToolResultSchema,
      { ...REQUEST, task: { ttl: 120_000 } },
    )) {
      kinds.push(msg.type);
      if (msg.type === 'taskCreated') {
        echoTaskId = msg.task.taskId;
        assert.equal(msg.task.status, 'working');
        assert.equal(msg.task.ttl, 120_000);
      }
      if (msg.type === 'result') result = msg.result as CallToolResult;
      if (msg.type === 'error') throw msg.error;
    }
    assert.equal(kinds[0], 'taskCreated');
    assert.equal(kinds.at(-1), 'result');
    assert.equal(textOf(result!), 'as a task');
  });

  it('calls a tool as a task, polls tasks/get, and gets tasks/result', CASE, async () => {
    const task = await startTask(client, 'sleep', { ms: 1500 });
    sleptId = task.taskId;
    // The call answers at once, with the task still working.
    assert.equal(task.status, 'working');
    assert.equal(task.ttl, 120_000);
    assert.ok((task.pollInterval ?? 0) > 0, 'pollInterval');

    const done = await waitForStatus(client, task.taskId, 'completed');
    assert.equal(done.taskId, task.taskId);
    const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, REQUEST)) as CallToolResult;
    assert.equal(textOf(result), 'slept 1500 ms');
    assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });
  });

  it("lists the session's tasks", CASE, async () => {
    const listed = await listAll(client);
    assert.equal(listed.get(echoTaskId), 'completed');
    assert.equal(listed.get(sleptId), 'completed');
  });

  it("cancels a running task, and the worker's tool stops", CASE, async () => {
    const task = await startTask(client, 'sleep', { ms: 60_000 });
    cancelledId = task.taskId;
    // Progress from the tool itself: it is running on the worker.
    const running = await pollTask(client, task.taskId, (t) => /^slept \d+ of 60000 ms$/.test(t.statusMessage ?? ''), 'progress');
    assert.equal(running.status, 'working');

    // The worker logs why the attempt ended; listen before cancelling.
    const stopped = logLine(
      service.shared!.worker,
      (r) => r['task_id'] === task.taskId && String(r['message']).startsWith('attempt '),
      `taskworker to end the attempt of ${task.taskId}`,
      15_000,
    );
    stopped.catch(() => {}); // awaited below; not an unhandled rejection meanwhile
    const cancelled = await client.experimental.tasks.cancelTask(task.taskId, REQUEST);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.taskId, task.taskId);

    // The tool saw the cancellation: the attempt stopped without a result
    // (not "attempt reported", which a tool that ran on would log).
    const rec = await stopped;
    assert.equal(rec['message'], 'attempt stopped; nothing stored');
    assert.match(String(rec['reason']), /cancel/);

    // And nothing moves afterwards: still cancelled, and no progress past
    // what it was when cancelled (the tool reports every second).
    for (let i = 0; i < 3; i++) {
      await sleep(1000);
      const later = await client.experimental.tasks.getTask(task.taskId, REQUEST);
      assert.equal(later.status, 'cancelled');
      assert.equal(later.statusMessage, cancelled.statusMessage);
      assert.equal(later.lastUpdatedAt, cancelled.lastUpdatedAt);
    }
    // A cancelled task has no result: tasks/result answers an error at once
    // (its code is the server's choice; it says why).
    await assert.rejects(
      client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, REQUEST),
      (e) => e instanceof McpError && /cancel/.test(e.message),
    );
  });

  it('refuses unknown tasks and cancelling ended ones (-32602)', CASE, async () => {
    await assert.rejects(client.experimental.tasks.getTask('no-such-task', REQUEST), isInvalidParams);
    await assert.rejects(client.experimental.tasks.cancelTask(sleptId, REQUEST), isInvalidParams);
    await assert.rejects(client.experimental.tasks.cancelTask(cancelledId, REQUEST), isInvalidParams);
    // Both are as they were.
    assert.equal((await client.experimental.tasks.getTask(sleptId, REQUEST)).status, 'completed');
    assert.equal((await client.experimental.tasks.getTask(cancelledId, REQUEST)).status, 'cancelled');
  });

  it('serves the same session after the gateway is killed and restarted', CASE, async () => {
    const sessionId = transport.sessionId;
    // A task still running on the worker while the gateway dies.
    const task = await startTask(client, 'sleep', { ms: 3000 });
    assert.equal(task.status, 'working');

    await stopProcess(gateway.proc, 'SIGKILL');
    // While it is down, requests fail instead of hanging.
    await assert.rejects(client.experimental.tasks.getTask(task.taskId, { timeout: 5000 }));

    gateway = await startGateway(service, mcpListen);
    // The same Client and transport, so the same session id: the new process
    // keeps no session table and answers for it.
    assert.equal(transport.sessionId, sessionId);
    const done = await waitForStatus(client, task.taskId, 'completed');
    assert.equal(done.taskId, task.taskId);
    const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema, REQUEST)) as CallToolResult;
    assert.equal(textOf(result), 'slept 3000 ms');
    assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: task.taskId });

    // The tasks made before the restart are all there.
    assert.equal((await client.experimental.tasks.getTask(sleptId, REQUEST)).status, 'completed');
    const first = (await client.experimental.tasks.getTaskResult(sleptId, CallToolResultSchema, REQUEST)) as CallToolResult;
    assert.equal(textOf(first), 'slept 1500 ms');
    const listed = await listAll(client);
    assert.equal(listed.get(echoTaskId), 'completed');
    assert.equal(listed.get(sleptId), 'completed');
    assert.equal(listed.get(cancelledId), 'cancelled');
    assert.equal(listed.get(task.taskId), 'completed');
  });
});
