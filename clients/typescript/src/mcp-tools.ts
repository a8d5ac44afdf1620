// What both sides of "an McpServer's tools on the fleet" share: how to read
// the tools registered on an McpServer (the SDK 1.x keeps them in
// `_registeredTools`, the object its tools/list and tools/call read), and
// where `moveToolsToFleet` keeps each tool as it was registered, so that a
// worker loading the same server after the move still runs the original
// handlers. Runtime imports of the SDK are avoided: it is an optional peer.
import type { McpServer, RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';

/** Where the registered tools as they were before the move are kept, on the McpServer. */
export const ORIGINAL_TOOLS = Symbol.for('@mcp-taskstore/client.original-tools');

export type RegisteredTools = Record<string, RegisteredTool>;

/** Whether `value` looks like an SDK McpServer (it has registered tools). */
export function isMcpServer(value: unknown): value is McpServer {
  return typeof value === 'object' && value !== null && typeof (value as { _registeredTools?: unknown })._registeredTools === 'object' && 'server' in value;
}

/** The McpServer's registered tools, by name (the live objects). */
export function registeredTools(server: McpServer): RegisteredTools {
  const tools = (server as unknown as { _registeredTools?: RegisteredTools })._registeredTools;
  if (!tools || typeof tools !== 'object') throw new Error('not an McpServer of the MCP TypeScript SDK 1.x (no registered tools)');
  return tools;
}

/** Each tool as registered, before `moveToolsToFleet` replaced its handler: copies, by name. */
export function originalTools(server: McpServer): RegisteredTools {
  const kept = (server as unknown as Record<symbol, RegisteredTools | undefined>)[ORIGINAL_TOOLS];
  const live = registeredTools(server);
  const out: RegisteredTools = {};
  for (const [name, tool] of Object.entries(live)) out[name] = kept?.[name] ?? tool;
  return out;
}

export function keepOriginal(server: McpServer, name: string, tool: RegisteredTool): void {
  const holder = server as unknown as Record<symbol, RegisteredTools | undefined>;
  const kept = (holder[ORIGINAL_TOOLS] ??= {});
  kept[name] ??= { ...tool };
}
