// End to end: a real McpServer (child process) keeps its tasks in GrpcTaskStore,
// a real SDK Client drives them over Streamable HTTP, and the tasks outlive
// the MCP server process. Runs once per backend.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { backends, sleep, startService, type RunningService } from './helpers/service.js';
import { connectClient, startMcpServer, type McpServerProcess } from './helpers/mcp.js';

type ToolResult = { content: Array<{ type: string; text?: string }>; isError?: boolean };
const textOf = (r: ToolResult) => r.content.map((c) => c.text ?? '').join('');

async function waitForStatus(client: Client, taskId: string, want: string, timeoutMs = 20_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const task = await client.experimental.tasks.getTask(taskId);
    if (task.status === want) return task;
    if (Date.now() > until) throw new Error(`task ${taskId} is ${task.status}, wanted ${want}`);
    await sleep(task.pollInterval ?? 200);
  }
}

async function startTask(client: Client, name: string, args: Record<string, unknown>, ttl = 120_000) {
  const created = await client.request(
    { method: 'tools/call', params: { name, arguments: args, task: { ttl } } },
    CreateTaskResultSchema,
  );
  return created.task;
}

for (const backend of backends()) {
  describe(`McpServer with GrpcTaskStore on taskstore ${backend}`, () => {
    let service: RunningService;
    let mcp: McpServerProcess;
    let direct: TaskStoreClient; // looks at the store behind the MCP server's back
    before(async () => {
      service = await startService(backend);
      direct = new TaskStoreClient({ endpoint: service.endpoint });
      mcp = await startMcpServer(service.endpoint);
    });
    after(async () => {
      await mcp?.kill();
      direct?.close();
      await service?.stop();
    });

    // Shared by the cases below, which run in order.
    let doneId = '';
    let cancelledId = '';
    let fleetId = '';

    it('streams a tool call made as a task to its result', async () => {
      const { client, close } = await connectClient(mcp.url);
      try {
        const stream = client.experimental.tasks.callToolStream(
          { name: 'slow-echo', arguments: { text: 'hello', delayMs: 300 } },
          CallToolResultSchema,
          { task: { ttl: 90_000 } },
        );
        const kinds: string[] = [];
        let result: ToolResult | undefined;
        for await (const msg of stream) {
          kinds.push(msg.type);
          if (msg.type === 'taskCreated') {
            doneId = msg.task.taskId;
            assert.equal(msg.task.ttl, 90_000);
          }
          if (msg.type === 'result') result = msg.result as ToolResult;
          if (msg.type === 'error') throw msg.error;
        }
        assert.equal(kinds[0], 'taskCreated');
        assert.equal(kinds.at(-1), 'result');
        assert.equal(textOf(result!), 'echo: hello');
        // The task is in taskstore, not in the MCP server's memory.
        const stored = await direct.getTask(doneId);
        assert.equal(stored.status, 'completed');
        assert.equal(stored.sessionId, 'demo-user');
      } finally {
        await close();
      }
    });

    it('polls tasks/get, fetches tasks/result, lists and cancels', async () => {
      const { client, close } = await connectClient(mcp.url);
      try {
        const task = await startTask(client, 'slow-echo', { text: 'polled', delayMs: 500 });
        assert.equal(task.status, 'working');
        assert.equal(task.pollInterval, 200);
        await waitForStatus(client, task.taskId, 'completed');
        const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)) as ToolResult;
        assert.equal(textOf(result), 'echo: polled');

        const slow = await startTask(client, 'slow-echo', { text: 'never', delayMs: 60_000 });
        cancelledId = slow.taskId;
        const cancelled = await client.experimental.tasks.cancelTask(slow.taskId);
        assert.equal(cancelled.status, 'cancelled');
        assert.equal((await client.experimental.tasks.getTask(slow.taskId)).status, 'cancelled');
        // A finished task cannot be cancelled (the SDK checks, the store agrees).
        await assert.rejects(client.experimental.tasks.cancelTask(task.taskId));

        const listed = new Map<string, string>();
        let cursor: string | undefined;
        do {
          const page = await client.experimental.tasks.listTasks(cursor);
          for (const t of page.tasks) listed.set(t.taskId, t.status);
          cursor = page.nextCursor;
        } while (cursor);
        assert.equal(listed.get(doneId), 'completed');
        assert.equal(listed.get(task.taskId), 'completed');
        assert.equal(listed.get(slow.taskId), 'cancelled');
      } finally {
        await close();
      }
    });

    it('runs a dispatched task on the worker fleet', async () => {
      const { client, close } = await connectClient(mcp.url);
      try {
        const task = await startTask(client, 'fleet', { tool: 'echo', arguments: { text: 'from the fleet' } });
        fleetId = task.taskId;
        // tasks/result blocks until the worker has stored the result.
        const result = (await client.experimental.tasks.getTaskResult(task.taskId, CallToolResultSchema)) as ToolResult;
        assert.match(textOf(result), /from the fleet/);
        assert.equal((await direct.getTask(task.taskId)).tool, 'echo');
      } finally {
        await close();
      }
    });

    it('still serves every task after the MCP server is killed and replaced', async () => {
      // A dispatched job that is still running while the MCP server dies.
      let sleeperId = '';
      {
        const { client, close } = await connectClient(mcp.url);
        sleeperId = (await startTask(client, 'fleet', { tool: 'sleep', arguments: { ms: 1500 } })).taskId;
        await close();
      }
      await mcp.kill();
      mcp = await startMcpServer(service.endpoint);

      const { client, close } = await connectClient(mcp.url);
      try {
        assert.equal((await client.experimental.tasks.getTask(doneId)).status, 'completed');
        const done = (await client.experimental.tasks.getTaskResult(doneId, CallToolResultSchema)) as ToolResult;
        assert.equal(textOf(done), 'echo: hello');
        assert.equal((await client.experimental.tasks.getTask(cancelledId)).status, 'cancelled');
        const fleet = (await client.experimental.tasks.getTaskResult(fleetId, CallToolResultSchema)) as ToolResult;
        assert.match(textOf(fleet), /from the fleet/);
        // The sleeper finishes on its worker; the new server serves its result.
        await client.experimental.tasks.getTaskResult(sleeperId, CallToolResultSchema);
        assert.equal((await client.experimental.tasks.getTask(sleeperId)).status, 'completed');
      } finally {
        await close();
      }
    });
  });
}
