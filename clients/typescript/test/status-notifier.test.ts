// TaskStatusNotifier, end to end: a real McpServer per session (Streamable
// HTTP) keeps its tasks in GrpcTaskStore, a real SDK Client listens for
// `notifications/tasks/status`, and the tasks are worked elsewhere: through
// another replica of the service (serve; on dev, which is one process, a
// second gRPC client), and by a worker of the fleet. The SDK alone sends
// nothing for such changes (the `unfollowed` control); the notifier sends
// each within a second. Runs once per backend.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { CreateTaskResultSchema, TaskStatusNotificationSchema, type Task } from '@modelcontextprotocol/sdk/types.js';
import { GrpcTaskStore, TaskStatusNotifier, TaskStoreClient, toMcpTask } from '@mcp-taskstore/client';
import {
  backends,
  binary,
  freePort,
  listening,
  sleep,
  spawnLogged,
  startService,
  stopProcess,
  type LoggedProcess,
  type RunningService,
} from './helpers/service.js';
import { startStatusServer, type StatusServer } from './helpers/status-server.js';

// "Within a second" of the change, measured by this process's clock.
const PROMPT_MS = 1000;

interface Received {
  task: Task;
  at: number;
}

/** An SDK Client connected to the status server, recording every status notification. */
class Listener {
  readonly received: Received[] = [];
  readonly client = new Client({ name: 'status-test', version: '1.0.0' });
  readonly transport: StreamableHTTPClientTransport;

  constructor(url: URL) {
    this.transport = new StreamableHTTPClientTransport(url);
    this.client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
      const { _meta, ...task } = n.params;
      this.received.push({ task: task as Task, at: Date.now() });
    });
  }

  of(taskId: string): Task[] {
    return this.received.filter((r) => r.task.taskId === taskId).map((r) => r.task);
  }

  /** The first notification for the task that `matches`, waiting for it. */
  async next(taskId: string, matches: (t: Task) => boolean, timeoutMs = 5000): Promise<Received> {
    const until = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.received.find((r) => r.task.taskId === taskId && matches(r.task));
      if (hit) return hit;
      if (Date.now() > until) throw new Error(`no matching notification for ${taskId} within ${timeoutMs} ms; got ${JSON.stringify(this.of(taskId))}`);
      await sleep(5);
    }
  }

  async startTask(name: string, args: Record<string, unknown> = {}): Promise<Task> {
    const created = await this.client.request(
      { method: 'tools/call', params: { name, arguments: args, task: { ttl: 120_000 } } },
      CreateTaskResultSchema,
    );
    return created.task;
  }
}

// Another `taskstore serve` on the same database and broker: a change made
// through it reaches the first replica's WatchTask through PostgreSQL.
async function startReplica(service: RunningService, listen = '127.0.0.1:0'): Promise<{ endpoint: string; proc: LoggedProcess }> {
  const { databaseUrl, amqpUrl, queuePrefix } = service.shared!;
  const proc = spawnLogged(binary('TASKSTORE_BIN', 'taskstore'), [
    '--log-format', 'json', 'serve', '--auth', 'none', '--listen', listen,
    '--database-url', databaseUrl, '--amqp-url', amqpUrl, '--queue-prefix', queuePrefix, '--shutdown-grace', '1s',
  ]);
  try {
    return { endpoint: `http://${(await listening(proc, 'the second replica')).addr}`, proc };
  } catch (err) {
    await stopProcess(proc);
    throw err;
  }
}

for (const backend of backends()) {
  describe(`TaskStatusNotifier on taskstore ${backend}`, () => {
    let service: RunningService;
    let replica: { endpoint: string; proc: LoggedProcess } | undefined;
    let elsewhere: TaskStoreClient; // another replica's client, or (dev) another client
    let mcp: StatusServer;
    let listener: Listener;
    before(async () => {
      service = await startService(backend);
      if (backend === 'serve') replica = await startReplica(service);
      elsewhere = new TaskStoreClient({ endpoint: replica?.endpoint ?? service.endpoint });
      mcp = await startStatusServer(service.endpoint);
      listener = new Listener(mcp.url);
      await listener.client.connect(listener.transport);
      await mcp.listening(listener.transport.sessionId!);
    });
    after(async () => {
      await listener?.client.close();
      await mcp?.close();
      elsewhere?.close();
      if (replica) await stopProcess(replica.proc);
      await service?.stop();
    });

    it('sends working, then completed, for a task worked through another replica', async () => {
      const task = await listener.startTask('external');
      assert.equal(task.status, 'working');
      const notifier = mcp.notifiers.get(listener.transport.sessionId!)!;
      assert.equal(notifier.following, 1);

      const t0 = Date.now();
      await elsewhere.updateTaskStatus({ taskId: task.taskId, status: 'working', statusMessage: 'halfway' });
      const working = await listener.next(task.taskId, (t) => t.statusMessage === 'halfway');
      assert.ok(working.at - t0 < PROMPT_MS, `working after ${working.at - t0} ms`);
      assert.equal(working.task.status, 'working');

      const t1 = Date.now();
      const stored = await elsewhere.storeTaskResult({ taskId: task.taskId, status: 'completed', result: { content: [] } });
      const completed = await listener.next(task.taskId, (t) => t.status === 'completed');
      assert.ok(completed.at - t1 < PROMPT_MS, `completed after ${completed.at - t1} ms`);
      // The full task, in the SDK's shape: what tasks/get answers.
      assert.deepEqual(completed.task, toMcpTask(stored));
      assert.deepEqual({ ...(await listener.client.experimental.tasks.getTask(task.taskId)), _meta: undefined }, { ...completed.task, _meta: undefined });

      // One notification per change; the creation (the client has the task) is not repeated.
      await sleep(300);
      assert.deepEqual(listener.of(task.taskId).map((t) => [t.status, t.statusMessage]), [['working', 'halfway'], ['completed', undefined]]);
      assert.equal(notifier.following, 0, 'the watch ends with the task');
    });

    it('sends cancelled for a task cancelled elsewhere', async () => {
      const task = await listener.startTask('external');
      const t0 = Date.now();
      await elsewhere.cancelTask(task.taskId);
      const cancelled = await listener.next(task.taskId, (t) => t.status === 'cancelled');
      assert.ok(cancelled.at - t0 < PROMPT_MS, `cancelled after ${cancelled.at - t0} ms`);
      assert.equal(listener.of(task.taskId).length, 1);
    });

    it("sends a fleet worker's progress and its result", async () => {
      // `sleep` reports progress every second, then stores its result.
      const task = await listener.startTask('fleet', { ms: 1500 });
      const completed = await listener.next(task.taskId, (t) => t.status === 'completed', 30_000);
      const late = completed.at - Date.parse(completed.task.lastUpdatedAt);
      assert.ok(late < PROMPT_MS, `completed ${late} ms after the worker stored it`);
      const seen = listener.of(task.taskId);
      assert.ok(seen.slice(0, -1).every((t) => t.status === 'working'), JSON.stringify(seen));
      assert.ok(seen.some((t) => t.status === 'working' && t.statusMessage), `no progress message in ${JSON.stringify(seen)}`);
    });

    it('control: without follow, the SDK sends nothing for a task finished elsewhere', async () => {
      const task = await listener.startTask('unfollowed');
      await elsewhere.storeTaskResult({ taskId: task.taskId, status: 'completed', result: { content: [] } });
      await sleep(PROMPT_MS + 500);
      assert.deepEqual(listener.of(task.taskId), []);
    });

    it('stops following when the session ends', async () => {
      const other = new Listener(mcp.url);
      await other.client.connect(other.transport);
      const sessionId = other.transport.sessionId!;
      await mcp.listening(sessionId);
      const task = await other.startTask('external');
      const notifier = mcp.notifiers.get(sessionId)!;
      assert.equal(notifier.following, 1);
      // DELETE ends the session: the server's transport closes, and the notifier with it.
      await other.transport.terminateSession();
      await other.client.close();
      const until = Date.now() + PROMPT_MS;
      while (notifier.following > 0 && Date.now() < until) await sleep(10);
      assert.equal(notifier.following, 0);
      assert.equal(notifier.follow(task), false, 'a closed notifier follows nothing');
      // A later change has nobody to go to, and is no error.
      await elsewhere.storeTaskResult({ taskId: task.taskId, status: 'completed', result: { content: [] } });
      await sleep(300);
      assert.deepEqual(other.of(task.taskId), []);
      assert.deepEqual(mcp.errors, []);
    });

    it('watches again after its replica restarts, and sends what changed meanwhile', { skip: backend !== 'serve' && 'dev is one process' }, async () => {
      // A second MCP server whose store talks to a replica that is going to restart.
      const addr = `127.0.0.1:${await freePort()}`;
      let restarting = await startReplica(service, addr);
      const viaRestarting = await startStatusServer(restarting.endpoint);
      const other = new Listener(viaRestarting.url);
      try {
        await other.client.connect(other.transport);
        await viaRestarting.listening(other.transport.sessionId!);
        const task = await other.startTask('external');
        // SIGTERM: the replica ends its WatchTask streams (UNAVAILABLE) and exits.
        await stopProcess(restarting.proc);
        await elsewhere.storeTaskResult({ taskId: task.taskId, status: 'completed', result: { content: [] } });
        restarting = await startReplica(service, addr);
        const t0 = Date.now();
        const completed = await other.next(task.taskId, (t) => t.status === 'completed', 15_000);
        // Watching again backs off to at most 5 s.
        assert.ok(completed.at - t0 < 6000, `completed ${completed.at - t0} ms after the restart`);
        assert.deepEqual(other.of(task.taskId).map((t) => t.status), ['completed']);
        assert.deepEqual(viaRestarting.errors, []);
      } finally {
        await other.client.close();
        await viaRestarting.close();
        await stopProcess(restarting.proc);
      }
    });

    it('is bounded, ignores terminal tasks, unfollows and closes', async () => {
      const store = new GrpcTaskStore({ endpoint: service.endpoint });
      const server = new McpServer({ name: 'bounded', version: '1.0.0' });
      const notifier = new TaskStatusNotifier(server, store, { maxTasks: 2 });
      try {
        const make = () => store.client.createTask({ requestId: 1, request: { method: 'tools/call' }, ttl: 60_000 }).then(toMcpTask);
        const [a, b, c] = await Promise.all([make(), make(), make()]);
        assert.equal(notifier.follow(a!), true);
        assert.equal(notifier.follow(a!.taskId), true, 'followed already');
        assert.equal(notifier.follow(b!), true);
        assert.equal(notifier.follow(c!), false, 'over maxTasks');
        assert.equal(notifier.following, 2);
        notifier.unfollow(a!.taskId);
        assert.equal(notifier.following, 1);
        assert.equal(notifier.follow({ ...c!, status: 'completed' }), false, 'a terminal task does not change');
        notifier.close();
        assert.equal(notifier.following, 0);
        assert.equal(notifier.follow(c!), false);
      } finally {
        notifier.close();
        store.close();
      }
    });
  });
}
