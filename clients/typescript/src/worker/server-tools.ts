// The worker side of an McpServer's tools on the fleet: each tool the
// server registered with `registerTool` becomes a WorkerTool that runs the
// original callback with the arguments validated by its schema and an
// `extra` built from the attempt: `signal` is the attempt's signal,
// progress notifications become the task's status message, and requests to
// the client (elicitation, sampling, roots) become the task's questions,
// keyed by their order in the call (`elicitation/create#1`, ...), so an
// attempt run again finds its answers.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { isMcpServer, originalTools } from '../mcp-tools.js';
import type { InputRequestBody, TaskSupport, ToolContext, WorkerTool } from './tool.js';

const ASKABLE = new Set(['elicitation/create', 'sampling/createMessage', 'roots/list']);

type Notification = { method: string; params?: Record<string, unknown> };

/** The extra argument an SDK tool callback gets, made from the attempt. */
function extraFor(ctx: ToolContext): Record<string, unknown> {
  const asked = new Map<string, number>();
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
    async sendRequest(request: { method: string; params?: Record<string, unknown> }) {
      if (!ASKABLE.has(request.method)) throw new Error(`a fleet worker cannot send ${request.method} to the client`);
      const n = (asked.get(request.method) ?? 0) + 1;
      asked.set(request.method, n);
      return ctx.ask(`${request.method}#${n}`, request as InputRequestBody);
    },
  };
}

/**
 * The tools registered on `server` with `registerTool`, as a worker serves
 * them (the originals, also after `moveToolsToFleet` moved them). Disabled
 * tools and `registerToolTask` tools are left out.
 */
export function toolsOfServer(server: McpServer): WorkerTool[] {
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
      handler: (args, ctx) => (hasSchema ? callback(args, extraFor(ctx)) : callback(extraFor(ctx))),
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
