// An McpServer per session (Streamable HTTP, in this process) whose tasks
// live in GrpcTaskStore and whose TaskStatusNotifier follows the tasks that
// are worked elsewhere; used by test/status-notifier.test.ts, which looks
// at the notifiers and at the sessions' standalone (GET) SSE streams.
//
// Tools (task-only):
//   external    {}      a task this process never touches: someone else
//                       (another replica, a gRPC client) works it; followed.
//   unfollowed  {}      the same, not followed: what the SDK alone does.
//   fleet       {ms}    dispatched to the fleet's `sleep` tool; followed.
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { GrpcTaskStore, TaskStatusNotifier } from '@mcp-taskstore/client';
import { sleep } from './service.js';

export interface StatusServer {
  url: URL;
  store: GrpcTaskStore;
  /** The notifier of each MCP session, by session id. */
  notifiers: Map<string, TaskStatusNotifier>;
  /** Errors the servers or notifiers reported. */
  errors: Error[];
  /** Resolves once the session's client has opened its standalone GET stream. */
  listening(sessionId: string, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startStatusServer(endpoint: string): Promise<StatusServer> {
  // The tools' tasks are worked elsewhere (another replica, another client,
  // the fleet), not in this process: nothing here should hold them (a hold
  // would also be a change of its own, "running on …", that the notifier sends).
  const store = new GrpcTaskStore({ endpoint, hold: false });
  const notifiers = new Map<string, TaskStatusNotifier>();
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const getStreams = new Map<string, ServerResponse>();
  const errors: Error[] = [];

  function buildServer(): { server: McpServer; notifier: TaskStatusNotifier } {
    const server = new McpServer(
      { name: 'status-notifications', version: '1.0.0' },
      {
        capabilities: { tasks: { requests: { tools: { call: {} } }, list: {}, cancel: {} } },
        taskStore: store,
        taskMessageQueue: new InMemoryTaskMessageQueue(),
      },
    );
    server.server.onerror = (err) => errors.push(err);
    const notifier = new TaskStatusNotifier(server, store);
    const task = (name: string, description: string, shape: z.ZodRawShape, follow: boolean, dispatch?: string) =>
      server.experimental.tasks.registerToolTask(
        name,
        { description, inputSchema: shape, execution: { taskSupport: 'required' } },
        {
          async createTask(_args, extra) {
            const created = await extra.taskStore.createTask({
              ttl: extra.taskRequestedTtl ?? 120_000,
              pollInterval: 200,
              ...(dispatch !== undefined && { context: { dispatch: { tool: dispatch } } }),
            });
            if (follow && !notifier.follow(created)) throw new Error(`could not follow ${created.taskId}`);
            return { task: created };
          },
          getTask: (_args, extra) => extra.taskStore.getTask(extra.taskId),
          getTaskResult: async (_args, extra) => (await extra.taskStore.getTaskResult(extra.taskId)) as CallToolResult,
        },
      );
    task('external', 'A task worked elsewhere, followed', {}, true);
    task('unfollowed', 'A task worked elsewhere, not followed', {}, false);
    task('fleet', "Sleeps on the fleet's sleep tool, followed", { ms: z.number() }, true, 'sleep');
    return { server, notifier };
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const sid = req.headers['mcp-session-id'];
    let transport = typeof sid === 'string' ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid !== undefined) {
        res.writeHead(404).end();
        return;
      }
      const { server, notifier } = buildServer();
      const fresh: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          transports.set(id, fresh);
          notifiers.set(id, notifier);
        },
      });
      fresh.onclose = () => {
        if (fresh.sessionId) transports.delete(fresh.sessionId);
      };
      await server.connect(fresh);
      transport = fresh;
    }
    if (req.method === 'GET' && typeof sid === 'string') getStreams.set(sid, res);
    await transport.handleRequest(req, res);
  }

  const http = createServer((req, res) => {
    handle(req, res).catch((err: Error) => {
      errors.push(err);
      if (!res.headersSent) res.writeHead(500).end();
    });
  });
  await new Promise<void>((ok) => http.listen(0, '127.0.0.1', ok));
  const { port } = http.address() as AddressInfo;

  return {
    url: new URL(`http://127.0.0.1:${port}/mcp`),
    store,
    notifiers,
    errors,
    async listening(sessionId, timeoutMs = 5000) {
      const until = Date.now() + timeoutMs;
      // The transport registers the stream before it answers the GET.
      while (!getStreams.get(sessionId)?.headersSent) {
        if (Date.now() > until) throw new Error(`session ${sessionId} opened no GET stream within ${timeoutMs} ms`);
        await sleep(10);
      }
    },
    async close() {
      for (const t of transports.values()) await t.close();
      http.closeAllConnections();
      await new Promise<void>((ok) => http.close(() => ok()));
      store.close();
    },
  };
}
