// @mcp-taskstore/client/worker: fleet workers in TypeScript. Declare tools
// with defineTool (or take an McpServer's with toolsOfServer) and serve them
// with Worker, or run `mcp-taskstore-worker <module>`.
export { defineTool, AskError, BackOff, RetryableError } from './tool.js';
export type { AskErrorKind, ConcurrencyLimit, InputRequestBody, InputSchema, RateLimit, RetryPolicy, TaskSupport, ToolArgs, ToolConfig, ToolContext, ToolReturn, WorkerTool } from './tool.js';
export { Worker, childTraceparent, type WorkerOptions } from './runtime.js';
export { toolsOfServer, toolsFrom } from './server-tools.js';
export { WorkerRefused } from './heartbeat.js';
export { WorkerMetrics, serveMetrics } from './metrics.js';
export { createLogger, silent, type Logger, type LogFormat, type LogLevel } from './log.js';
export { topologyFor, amqpArguments, type Topology } from './broker.js';
export { TaskStopped, type StopReason } from '../protocol.js';
