// Issue 25, item 3: an ordinary McpServer's tools (test/fixtures/fleet-tools.ts,
// `registerTool`) served by TypeScript fleet workers
// (`mcp-taskstore-worker fleet-tools.js#buildServer`), called through the MCP
// server that moved them there in one line (fleet-server.ts:
// moveToolsToFleet) and through taskstore's own /mcp (a gateway replica),
// while the worker running the call is killed with SIGKILL: each call
// completes, once (the tool records each completion; one line per call),
// on the other worker. Lease 2 s, reaper 0.5 s.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CallToolResultSchema, CreateTaskResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { connectClient } from './helpers/mcp.js';
import { backends, freePort, sleep, startGateway, startService, stopProcess, type Gateway, type RunningService } from './helpers/service.js';
import { startTsWorker, toolsListed, type TsWorker } from './helpers/ts-worker.js';

const MODULE = './build-test/test/fixtures/fleet-tools.js#buildServer';
const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'fleet-server.js');
type ToolResult = { content: Array<{ type: string; text?: string }>; isError?: boolean };
const textOf = (r: ToolResult) => r.content.map((c) => c.text ?? '').join('');

function startFleetServer(endpoint: string): Promise<{ url: URL; proc: ChildProcess }> {
  const proc = spawn(process.execPath, [FIXTURE], { env: { ...process.env, TASKSTORE_ENDPOINT: endpoint }, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error('the fleet MCP server did not start within 20 s')), 20_000);
    createInterface({ input: proc.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      ok({ url: new URL(`http://127.0.0.1:${(JSON.parse(line) as { port: number }).port}/mcp`), proc });
    });
  });
}

describe("an McpServer's tools on the fleet", { skip: !backends().includes('serve') && 'needs serve (RabbitMQ)' }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-fleet-'));
  const completions = join(dir, 'completions');
  let service: RunningService;
  let direct: TaskStoreClient;
  let gateway: Gateway;
  let mcp: { url: URL; proc: ChildProcess };
  const workers: TsWorker[] = [];
  const startWorker = async (id: string) => {
    const w = await startTsWorker(service, MODULE, ['--worker-id', id, '--concurrency', '2'], { env: { COMPLETIONS_FILE: completions } });
    workers.push(w);
    return w;
  };
  const completed = (tag: string) => readFileSafe(completions).filter((l) => l === tag).length;

  before(async () => {
    service = await startService('serve', { args: ['--lease-duration', '2s', '--reaper-interval', '500ms'], moreTools: ['slow_add', 'confirm_delete'] });
    direct = new TaskStoreClient({ endpoint: service.endpoint });
    await startWorker('ts-fleet-1');
    await startWorker('ts-fleet-2');
    await toolsListed(service.endpoint, ['slow_add', 'confirm_delete'], 2);
    gateway = await startGateway(service, `127.0.0.1:${await freePort()}`);
    mcp = await startFleetServer(service.endpoint);
  });
  after(async () => {
    if (mcp) await stopProcess(mcp.proc, 'SIGKILL');
    if (gateway) await stopProcess(gateway.proc);
    for (const w of workers) await w.stop('SIGKILL');
    direct?.close();
    await service?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * Kills the worker that runs the task once it has made progress; starts another in its place.
   * Follows the task with a watch: reads show a progress message only when it is written, every
   * few seconds, while a watcher sees each one (docs/execution.md, "Progress").
   */
  async function killItsWorker(taskId: string): Promise<string> {
    const abort = new AbortController();
    try {
      for await (const task of direct.watchTask(taskId, { signal: abort.signal, timeoutMs: 10_000 })) {
        if (!/^step [3-9]/.test(task.statusMessage ?? '')) continue;
        for (let i = 0; i < 40; i++) {
          const running = workers.find((w) => w.proc.exitCode === null && w.proc.signalCode === null && w.proc.logTail.some((l) => l.includes(taskId)));
          if (running) {
            await running.stop('SIGKILL');
            await startWorker(`${running.workerId}-again`);
            return running.workerId;
          }
          await sleep(25);
        }
        throw new Error(`task ${taskId} is at "${task.statusMessage}" but no live worker logged it`);
      }
    } finally {
      abort.abort();
    }
    throw new Error(`task ${taskId} made no progress on a worker`);
  }

  it('lists the same tools: the MCP server (now task-capable) and taskstore /mcp (from the workers\' descriptions)', async () => {
    const own = await connectClient(mcp.url);
    const gw = await connectClient(gateway.url);
    try {
      const mine = (await own.client.listTools()).tools.find((t) => t.name === 'slow_add');
      assert.equal(mine?.description, 'Adds two numbers, slowly, with progress');
      assert.deepEqual(mine?.execution, { taskSupport: 'optional' });
      const theirs = (await gw.client.listTools()).tools.find((t) => t.name === 'slow_add');
      assert.equal(theirs?.title, 'Slow add');
      assert.equal(theirs?.description, mine?.description);
      assert.deepEqual(Object.keys((theirs?.inputSchema.properties ?? {}) as object).sort(), ['a', 'b', 'ms', 'tag']);
    } finally {
      await own.close();
      await gw.close();
    }
  });

  it('a plain call through the MCP server completes exactly once though the worker running it is killed', async () => {
    const { client, close } = await connectClient(mcp.url);
    try {
      const call = client.callTool({ name: 'slow_add', arguments: { a: 2, b: 3, ms: 2500, tag: 'sdk-call' } }, CallToolResultSchema, { timeout: 60_000 });
      let taskId = '';
      for (let i = 0; i < 100 && !taskId; i++) {
        taskId = (await direct.listTasks({ tool: 'slow_add', statuses: ['working'] })).tasks[0]?.taskId ?? '';
        if (!taskId) await sleep(50);
      }
      assert.ok(taskId, 'the call is a dispatched task');
      const killed = await killItsWorker(taskId);
      const result = (await call) as ToolResult;
      assert.equal(textOf(result), '5');
      assert.equal(completed('sdk-call'), 1, 'the tool completed once');
      const task = await direct.getTask(taskId);
      assert.equal(task.status, 'completed');
      assert.ok(killed);
    } finally {
      await close();
    }
  });

  it('a task call through taskstore /mcp completes exactly once though the worker running it is killed', async () => {
    const { client, close } = await connectClient(gateway.url);
    try {
      const created = await client.request(
        { method: 'tools/call', params: { name: 'slow_add', arguments: { a: 3, b: 4, ms: 2500, tag: 'gateway-call' }, task: { ttl: 120_000 } } },
        CreateTaskResultSchema,
      );
      await killItsWorker(created.task.taskId);
      const result = (await client.experimental.tasks.getTaskResult(created.task.taskId, CallToolResultSchema, { timeout: 60_000 })) as ToolResult;
      assert.equal(textOf(result), '7');
      assert.equal(completed('gateway-call'), 1, 'the tool completed once');
    } finally {
      await close();
    }
  });

  it("a tool's own elicitInput becomes the task's question; its answer reaches the tool", async () => {
    const { client, close } = await connectClient(mcp.url);
    try {
      const created = await client.request({ method: 'tools/call', params: { name: 'confirm_delete', arguments: { path: '/tmp/x' }, task: { ttl: 120_000 } } }, CreateTaskResultSchema);
      const id = created.task.taskId;
      let questions = await direct.listInputRequests(id);
      for (let i = 0; questions.length === 0 && i < 100; i++) {
        await sleep(100);
        questions = await direct.listInputRequests(id);
      }
      assert.equal(questions[0]?.key, 'elicitation/create#1');
      assert.equal(questions[0]?.request.params?.['message'], 'Delete /tmp/x?');
      await direct.answerInputRequests(id, { 'elicitation/create#1': { action: 'accept', content: {} } });
      const result = (await client.experimental.tasks.getTaskResult(id, CallToolResultSchema, { timeout: 30_000 })) as ToolResult;
      assert.equal(textOf(result), 'deleted /tmp/x');
    } finally {
      await close();
    }
  });
});

function readFileSafe(path: string): string[] {
  try {
    return readFileSync(path, 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}
