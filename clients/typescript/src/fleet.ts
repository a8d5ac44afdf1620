// One line to move an McpServer's tools onto the fleet: every tool
// registered with `registerTool` keeps its name, title, description and
// schema in the server's tools/list, but a call no longer runs it here: the
// server creates a dispatched task (CreateTask with dispatch, one statement
// with its job), a fleet worker serving the same tools (the worker command
// loading the same McpServer, `mcp-taskstore-worker`) runs the original
// handler, and the server answers with the task's result. So the calls
// survive crashes of the MCP server and of workers, and run again after a
// worker dies mid-call.
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, Result } from '@modelcontextprotocol/sdk/types.js';
import { status as Status } from '@grpc/grpc-js';
import { idempotencyKeyOf, startOf } from './client.js';
import { TaskStoreError } from './errors.js';
import { keepOriginal, registeredTools } from './mcp-tools.js';
import { GrpcTaskStore } from './task-store.js';

export interface FleetOptions {
  /** Move only these tools (default: every tool registered with `registerTool`). */
  tools?: string[];
  /** The ttl of a call's task when the client asks none (ms; default: the service's). */
  ttl?: number;
  /** How many times a call's task may be started (a crash or a retryable error uses one; default: the service's). */
  maxAttempts?: number;
  /** The poll interval suggested to clients, and how often the SDK polls for a synchronous call's result (ms, default 250). */
  pollInterval?: number;
}

type Extra = {
  sessionId?: string;
  requestId: string | number;
  signal: AbortSignal;
  taskId?: string;
  taskRequestedTtl?: number;
  taskStore?: unknown;
  _meta?: Record<string, unknown>;
};

/** The call's idempotency key (`_meta`), as the create's; a retried call then waits for the first call's task. */
function idempotent(extra: Extra): { idempotencyKey?: string } {
  const idempotencyKey = idempotencyKeyOf(extra._meta);
  return idempotencyKey === undefined ? {} : { idempotencyKey };
}

/** The extra argument, last whether or not the tool has an input schema. */
const extraOf = (args: unknown[]) => args[args.length - 1] as Extra;

/**
 * Makes the fleet run `server`'s tools: call it after registering them (and
 * before connecting). A server whose task store is `store` answers each
 * call as a task (`taskSupport: 'optional'`): a task call gets the task at
 * once, a plain call waits for its result (the SDK polls the store). A
 * server without a task store answers plain calls only, waiting for the
 * result through `store`. Tools registered with `registerToolTask` are left
 * alone. Returns the names of the tools moved.
 */
export function moveToolsToFleet(server: McpServer, store: GrpcTaskStore, options: FleetOptions = {}): string[] {
  const tools = registeredTools(server);
  const serverStore = (server.server as unknown as { _taskStore?: unknown })._taskStore;
  if (serverStore !== undefined && !(serverStore instanceof GrpcTaskStore)) {
    throw new Error("moveToolsToFleet: the McpServer's task store must be a GrpcTaskStore (the fleet's tasks live in taskstore)");
  }
  const pollInterval = options.pollInterval ?? 250;
  const dispatchOf = (name: string) => ({ tool: name, ...(options.maxAttempts !== undefined && { maxAttempts: options.maxAttempts }) });
  const moved: string[] = [];
  for (const [name, tool] of Object.entries(tools)) {
    if (options.tools && !options.tools.includes(name)) continue;
    if (typeof tool.handler !== 'function') continue; // a registerToolTask tool runs its own tasks
    keepOriginal(server, name, tool);
    if (serverStore !== undefined) {
      tool.execution = { taskSupport: 'optional' };
      tool.handler = {
        async createTask(...args: unknown[]) {
          const extra = extraOf(args) as Extra & { taskStore: { createTask(p: object): Promise<Result> } };
          const ttl = extra.taskRequestedTtl ?? options.ttl;
          const task = await extra.taskStore.createTask({ ...(ttl !== undefined && { ttl }), pollInterval, context: { dispatch: dispatchOf(name) } });
          return { task };
        },
        getTask: (...args: unknown[]) => (extraOf(args).taskStore as { getTask(id: string): Promise<Result> }).getTask(extraOf(args).taskId!),
        getTaskResult: (...args: unknown[]) => (extraOf(args).taskStore as { getTaskResult(id: string): Promise<Result> }).getTaskResult(extraOf(args).taskId!),
      } as unknown as RegisteredTool['handler'];
    } else {
      tool.handler = (async (...args: unknown[]) => {
        const extra = extraOf(args);
        const callArgs = args.length > 1 ? args[0] : {};
        return runOnFleet(store, name, callArgs, extra, { ...options, pollInterval }, dispatchOf(name));
      }) as RegisteredTool['handler'];
    }
    moved.push(name);
  }
  return moved;
}

/** A plain call: dispatch, wait for the result; a call aborted by its client cancels the task. */
async function runOnFleet(
  store: GrpcTaskStore,
  name: string,
  args: unknown,
  extra: Extra,
  options: FleetOptions,
  dispatch: { tool: string; maxAttempts?: number },
): Promise<CallToolResult> {
  const session = store.session(extra.sessionId);
  const task = await store.client.createTask({
    ...session,
    requestId: extra.requestId,
    request: { jsonrpc: '2.0', id: extra.requestId, method: 'tools/call', params: { name, arguments: args ?? {} } },
    ...(options.ttl !== undefined && { ttl: options.ttl }),
    ...(options.pollInterval !== undefined && { pollInterval: options.pollInterval }),
    dispatch: { ...dispatch, ...startOf(extra._meta) },
    ...idempotent(extra),
  });
  const cancel = () => void store.client.cancelTask(task.taskId, session).catch(() => {});
  extra.signal.addEventListener('abort', cancel, { once: true });
  try {
    for (;;) {
      try {
        const { result } = await store.client.getTaskResult<CallToolResult>(task.taskId, { ...session, wait: true, signal: extra.signal });
        return result;
      } catch (err) {
        // The service's longest wait passed, or a replica went away: wait again.
        if (err instanceof TaskStoreError && (err.code === Status.DEADLINE_EXCEEDED || err.code === Status.UNAVAILABLE) && !extra.signal.aborted) continue;
        if (err instanceof TaskStoreError && err.code === Status.FAILED_PRECONDITION) {
          const now = await store.client.getTask(task.taskId, session);
          return { content: [{ type: 'text', text: now.statusMessage ?? `the task is ${now.status}` }], isError: true };
        }
        throw err;
      }
    }
  } finally {
    extra.signal.removeEventListener('abort', cancel);
  }
}
