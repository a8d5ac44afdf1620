// The worker side of an McpServer's tools on the fleet: each tool the
// server registered with `registerTool` becomes a WorkerTool that runs the
// original callback with the arguments validated by its schema and an
// `extra` built from the attempt: `signal` is the attempt's signal,
// progress notifications become the task's status message, and requests to
// the client (elicitation, sampling, roots), through `extra.sendRequest` or
// the server's own `elicitInput` / `createMessage` / `listRoots`, become the
// task's questions, keyed by their order in the call
// (`elicitation/create#1`, ...), so an attempt run again finds its answers.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isMcpServer, originalTools } from '../mcp-tools.js';
import type { InputRequestBody, TaskSupport, ToolContext, WorkerTool } from './tool.js';

const ASKABLE = new Set(['elicitation/create', 'sampling/createMessage', 'roots/list']);

type Notification = { method: string; params?: Record<string, unknown> };
type ClientRequest = { method: string; params?: Record<string, unknown> };

/** One call of a server's tool: its context, and the questions asked so far (for their keys). */
interface Call {
  ctx: ToolContext;
  ask(request: ClientRequest): Promise<Record<string, unknown>>;
}

function callOf(ctx: ToolContext): Call {
  const asked = new Map<string, number>();
  return {
    ctx,
    ask(request) {
      if (!ASKABLE.has(request.method)) throw new Error(`a fleet worker cannot send ${request.method} to the client`);
      const n = (asked.get(request.method) ?? 0) + 1;
      asked.set(request.method, n);
      return ctx.ask(`${request.method}#${n}`, request as InputRequestBody);
    },
  };
}

/** The call a tool's code runs in, for requests it sends through the server (`server.server.elicitInput(...)`). */
const current = new AsyncLocalStorage<Call>();
const ROUTED = Symbol.for('@mcp-taskstore/client.worker-requests');

/**
 * Sends the server's own requests to the client (`elicitInput`,
 * `createMessage`, `listRoots`, made while one of its tools runs on this
 * worker) as the task's questions. The worker's copy of the server has no
 * client, so it is told the client can answer them.
 */
function routeRequests(server: McpServer): void {
  const inner = server.server as unknown as Record<string | symbol, unknown> & {
    request: (request: ClientRequest, ...rest: unknown[]) => Promise<unknown>;
    transport?: unknown;
    _clientCapabilities?: unknown;
  };
  if (inner[ROUTED]) return;
  inner[ROUTED] = true;
  const original = inner.request.bind(inner);
  inner.request = (request: ClientRequest, ...rest: unknown[]) => {
    const call = current.getStore();
    if (call && ASKABLE.has(request.method)) return call.ask(request);
    return original(request, ...rest);
  };
  if (!inner.transport) inner._clientCapabilities ??= { elicitation: { form: {}, url: {} }, sampling: {}, roots: {} };
}

/** The extra argument an SDK tool callback gets, made from the attempt. */
function extraFor(call: Call): Record<string, unknown> {
  const { ctx } = call;
  return {
    signal: ctx.signal,
    requestId: ctx.taskId,
    // A progress token, so tools that report progress only when asked to do.
    _meta: { progressToken: ctx.taskId },
    async sendNotification(n: Notification) {
      if (n.method !== 'notifications/progress') return;
      const p = n.params ?? {};
      const message =
        typeof p['message'] === 'string'
          ? p['message']
          : `${String(p['progress'] ?? '')}${p['total'] !== undefined ? ` of ${String(p['total'])}` : ''}`;
      if (message) await ctx.progress(message);
    },
    sendRequest: (request: ClientRequest) => call.ask(request),
  };
}

/**
 * The tools registered on `server` with `registerTool`, as a worker serves
 * them (the originals, also after `moveToolsToFleet` moved them). Disabled
 * tools and `registerToolTask` tools are left out.
 */
export function toolsOfServer(server: McpServer): WorkerTool[] {
  routeRequests(server);
  const out: WorkerTool[] = [];
  for (const [name, tool] of Object.entries(originalTools(server))) {
    if (!tool.enabled || typeof tool.handler !== 'function') continue;
    const callback = tool.handler as (...args: unknown[]) => CallToolResult | Promise<CallToolResult>;
    const hasSchema = tool.inputSchema !== undefined;
    const support = tool.execution?.taskSupport;
    const taskSupport: TaskSupport = support === 'required' || support === 'forbidden' ? support : 'optional';
    out.push({
      name,
      ...(tool.title !== undefined && { title: tool.title }),
      ...(tool.description !== undefined && { description: tool.description }),
      ...(hasSchema && { inputSchema: tool.inputSchema! }),
      // Registered tools are synchronous in the server; on the fleet they
      // run as tasks, which a client may or may not ask for.
      taskSupport: taskSupport === 'forbidden' ? 'optional' : taskSupport,
      handler: (args, ctx) => {
        const call = callOf(ctx);
        return current.run(call, () => (hasSchema ? callback(args, extraFor(call)) : callback(extraFor(call))));
      },
    });
  }
  return out;
}

/** Tools from whatever a module exports: WorkerTools, an McpServer, or a function making either. */
export async function toolsFrom(value: unknown): Promise<WorkerTool[]> {
  let v = value;
  if (typeof v === 'function') v = await (v as () => unknown)();
  if (isMcpServer(v)) return toolsOfServer(v);
  if (Array.isArray(v)) {
    const tools: WorkerTool[] = [];
    for (const item of v) {
      if (isMcpServer(item)) tools.push(...toolsOfServer(item));
      else if (item && typeof item === 'object' && typeof (item as WorkerTool).name === 'string' && typeof (item as WorkerTool).handler === 'function') tools.push(item as WorkerTool);
      else throw new Error('the tools must be defineTool(...)s or McpServers');
    }
    return tools;
  }
  throw new Error('expected an array of defineTool(...)s, an McpServer, or a function returning either');
}
