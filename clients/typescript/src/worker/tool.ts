// What a fleet tool is in TypeScript: a name, a title, a description, a zod
// input schema (a raw shape or a schema, as the MCP SDK's registerTool takes
// it), MCP taskSupport, an optional retry policy and concurrency limit, and an async handler that gets the validated
// arguments and a ToolContext and returns a CallToolResult.
import type { AnySchema, SchemaOutput, ShapeOutput, ZodRawShapeCompat } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import { getParseErrorMessage, normalizeObjectSchema, safeParseAsync } from '@modelcontextprotocol/sdk/server/zod-compat.js';
import { toJsonSchemaCompat } from '@modelcontextprotocol/sdk/server/zod-json-schema-compat.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { msToDuration } from '../convert.js';
import type { WireRetryPolicy, WireTaskSupport, WireToolDescription } from '../wire.js';
import { checkConcurrency, checkFairnessKey, checkRate, wireConcurrency, wireRate, type ConcurrencyLimit, type RateLimit } from './limits.js';

export type { ConcurrencyLimit, RateLimit } from './limits.js';

/** MCP `execution.taskSupport`: whether clients may, must or must not call the tool as a task. */
export type TaskSupport = 'optional' | 'required' | 'forbidden';

export type InputSchema = ZodRawShapeCompat | AnySchema;

/** The handler's arguments for an input schema (a raw shape or a schema), as registerTool infers them. */
export type ToolArgs<S extends InputSchema | undefined> = S extends ZodRawShapeCompat
  ? ShapeOutput<S>
  : S extends AnySchema
    ? SchemaOutput<S>
    : Record<string, unknown>;

/** What a handler returns: a CallToolResult, or a string (one text item). */
export type ToolReturn = CallToolResult | string;

export interface ToolConfig<S extends InputSchema | undefined = undefined> {
  title?: string;
  description?: string;
  /** Zod: a raw shape (`{ text: z.string() }`) or a schema; unset: any object. */
  inputSchema?: S;
  /** Default `optional`. */
  taskSupport?: TaskSupport;
  /** How its tasks are retried; unset: the service's policy. */
  retry?: RetryPolicy;
  /** At most how many of its tasks run at once per key; unset: no limit. */
  concurrency?: ConcurrencyLimit;
  /** At most how many of its tasks start per window per key; unset: no limit. */
  rate?: RateLimit;
  /**
   * Within a tenant, the key whose values take turns when its tasks wait for
   * room (`'arguments.customerId'`: one customer's flood does not hold up the
   * tenant's other customers); unset: first in, first out.
   */
  fairnessKey?: string;
}

/**
 * A tool's retry policy, sent to the service with its description. What is
 * left out is the service's; a task keeps the policy its tool had when it
 * was created.
 */
export interface RetryPolicy {
  /** Attempts a task gets when its caller asks for no number (1 to 100; 1: never retried). */
  maxAttempts?: number;
  /** The first retry's backoff ceiling (10 ms to 24 h); doubles per attempt, with jitter. */
  backoffBaseMs?: number;
  /** The longest backoff (10 ms to 24 h). */
  backoffMaxMs?: number;
  /** `false`: a `RetryableError` fails the task at once. Default `true`. */
  retryErrors?: boolean;
  /**
   * `false`: a task whose worker was lost mid-attempt (killed, frozen, cut
   * off) fails rather than running again, for tools whose half-done work must
   * not be repeated. Default `true`.
   */
  retryLostWorkers?: boolean;
}

/** An MCP input request a tool may ask its caller. */
export type InputRequestBody =
  | { method: 'elicitation/create'; params: Record<string, unknown> }
  | { method: 'sampling/createMessage'; params: Record<string, unknown> }
  | { method: 'roots/list'; params?: Record<string, unknown> };

/** What a running tool can do besides computing its result. */
export interface ToolContext {
  /**
   * Aborted when the tool must stop: the task was cancelled, finished
   * elsewhere, expired, its lease was lost, the worker is shutting down, or a
   * question waits without a worker. `signal.reason` is a `TaskStopped`
   * saying which. Return (or throw) soon: past the worker's stop grace the
   * attempt ends without the tool, and nothing the tool reports counts.
   */
  readonly signal: AbortSignal;
  readonly taskId: string;
  readonly tenantId: string;
  /** This attempt's number, from 1, and how many there may be. */
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The W3C `traceparent` of this attempt (a child of the job's), for the tool's own spans and calls. */
  readonly traceparent: string | undefined;
  /** Sets the task's status message (status `working`); best effort. */
  progress(message: string): Promise<void>;
  /**
   * Asks the task's caller a question and waits for the answer: an MCP
   * input request under `key`, which names this question for the task's
   * whole life (never reuse it for another request). The task is
   * `input_required` until the caller answers. Returns the caller's result
   * as given (an `ElicitResult` with its `action`, a `CreateMessageResult`, a
   * `ListRootsResult`). A key answered before answers at once, so an attempt
   * run again finds its answers. Throws `AskError` (`stopped`, `parked`,
   * `refused`): let it propagate.
   */
  ask(key: string, request: InputRequestBody): Promise<Record<string, unknown>>;
  /**
   * `ask` for an `elicitation/create` form: the filled-in `content` of an
   * accepted answer; a declined or cancelled one throws `AskError`
   * (`declined`, with the answer).
   */
  elicit(key: string, message: string, requestedSchema: Record<string, unknown>): Promise<Record<string, unknown>>;
}

/** A failure a retry may fix: the task is dispatched again after a backoff, until its attempts run out. */
export class RetryableError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RetryableError';
  }
}

/**
 * "Back off this tool's key until `until`" (a 429's Retry-After): the task
 * is given back without spending an attempt, and every task of the key
 * (its rate key, else its concurrency key, else the whole tool) waits until
 * then. At most 24 hours ahead; a time already passed means now.
 */
export class BackOff extends Error {
  readonly until: Date;

  constructor(until: Date, message = 'backing off', options?: { cause?: unknown }) {
    super(message, options);
    if (Number.isNaN(until.getTime())) throw new RangeError('BackOff needs a valid time');
    this.until = until;
    this.name = 'BackOff';
  }

  /** Backs off for `ms` from now. */
  static after(ms: number, message?: string): BackOff {
    if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`BackOff.after needs ms >= 0, got ${ms}`);
    return new BackOff(new Date(Date.now() + ms), message);
  }
}

/** Why `ask` gives no answer. */
export type AskErrorKind = 'stopped' | 'parked' | 'declined' | 'refused';

export class AskError extends Error {
  constructor(
    readonly kind: AskErrorKind,
    message: string,
    /** The answer, for `declined`. */
    readonly answer?: Record<string, unknown>,
  ) {
    super(message);
    this.name = 'AskError';
  }
}

/** A tool a worker serves; made by `defineTool` (or from an McpServer's tools). */
export interface WorkerTool {
  readonly name: string;
  readonly title?: string;
  readonly description?: string;
  /** The zod schema, normalized to an object schema; undefined: any object. */
  readonly inputSchema?: AnySchema;
  /** A JSON Schema given as is, for tools without a zod schema. */
  readonly jsonSchema?: Record<string, unknown>;
  readonly taskSupport: TaskSupport;
  readonly retry?: RetryPolicy;
  readonly concurrency?: ConcurrencyLimit;
  readonly rate?: RateLimit;
  readonly fairnessKey?: string;
  readonly handler: (args: unknown, ctx: ToolContext) => ToolReturn | Promise<ToolReturn>;
}

// MCP tool names; the service's (and AMQP routing keys') rule.
const TOOL_NAME = /^[A-Za-z0-9_.\/-]{1,128}$/;

/**
 * Declares a tool for a worker, as `McpServer.registerTool(name, config,
 * handler)` does: the handler gets the arguments validated by
 * `inputSchema` and a `ToolContext`.
 */
export function defineTool<S extends InputSchema | undefined = undefined>(
  name: string,
  config: ToolConfig<S>,
  handler: (args: ToolArgs<S>, ctx: ToolContext) => ToolReturn | Promise<ToolReturn>,
): WorkerTool {
  if (!TOOL_NAME.test(name)) throw new Error(`invalid tool name ${JSON.stringify(name)}: 1 to 128 of A-Z a-z 0-9 _ - . /`);
  const schema = config.inputSchema === undefined ? undefined : normalizeObjectSchema(config.inputSchema);
  if (config.inputSchema !== undefined && !schema) throw new Error(`tool ${name}: inputSchema must be a zod object schema or a raw shape`);
  const concurrency = config.concurrency === undefined ? undefined : checkConcurrency(name, config.concurrency);
  const rate = config.rate === undefined ? undefined : checkRate(name, config.rate);
  const fairnessKey = config.fairnessKey === undefined ? undefined : checkFairnessKey(name, config.fairnessKey);
  return {
    name,
    ...(config.title !== undefined && { title: config.title }),
    ...(config.description !== undefined && { description: config.description }),
    ...(schema && { inputSchema: schema }),
    taskSupport: config.taskSupport ?? 'optional',
    ...(config.retry !== undefined && { retry: config.retry }),
    ...(concurrency !== undefined && { concurrency }),
    ...(rate !== undefined && { rate }),
    ...(fairnessKey !== undefined && { fairnessKey }),
    handler: handler as WorkerTool['handler'],
  };
}

const EMPTY_OBJECT = { type: 'object', properties: {} };

/** The JSON Schema of a tool's arguments, as the SDK's tools/list converts it. */
export function jsonSchemaOf(tool: WorkerTool): Record<string, unknown> {
  if (tool.jsonSchema) return tool.jsonSchema;
  if (!tool.inputSchema) return EMPTY_OBJECT;
  return toJsonSchemaCompat(tool.inputSchema as Parameters<typeof toJsonSchemaCompat>[0], { strictUnions: true, pipeStrategy: 'input' }) as Record<string, unknown>;
}

const TASK_SUPPORT: Record<TaskSupport, WireTaskSupport> = {
  optional: 'TASK_SUPPORT_OPTIONAL',
  required: 'TASK_SUPPORT_REQUIRED',
  forbidden: 'TASK_SUPPORT_FORBIDDEN',
};

/** The tool as the heartbeat describes it (MCP clients see this in tools/list). */
export function describeTool(tool: WorkerTool): WireToolDescription {
  return {
    name: tool.name,
    title: tool.title ?? '',
    description: tool.description ?? '',
    inputSchemaJson: JSON.stringify(jsonSchemaOf(tool)),
    taskSupport: TASK_SUPPORT[tool.taskSupport],
    ...(tool.retry !== undefined && { retry: wireRetry(tool.retry) }),
    ...(tool.concurrency !== undefined && { concurrency: wireConcurrency(tool.concurrency) }),
    ...(tool.rate !== undefined && { rate: wireRate(tool.rate) }),
    fairnessKey: tool.fairnessKey ?? '',
  };
}

function wireRetry(policy: RetryPolicy): WireRetryPolicy {
  return {
    ...(policy.maxAttempts !== undefined && { maxAttempts: policy.maxAttempts }),
    ...(policy.backoffBaseMs !== undefined && { backoffBase: msToDuration(policy.backoffBaseMs) }),
    ...(policy.backoffMaxMs !== undefined && { backoffMax: msToDuration(policy.backoffMaxMs) }),
    ...(policy.retryErrors !== undefined && { retryErrors: policy.retryErrors }),
    ...(policy.retryLostWorkers !== undefined && { retryLostWorkers: policy.retryLostWorkers }),
  };
}

/** The arguments validated as the SDK validates them; throws an Error saying what is wrong. */
export async function validateArgs(tool: WorkerTool, args: unknown): Promise<unknown> {
  if (!tool.inputSchema) return args ?? {};
  const parsed = await safeParseAsync(tool.inputSchema, args ?? {});
  if (!parsed.success) {
    throw new Error(`Input validation error: Invalid arguments for tool ${tool.name}: ${getParseErrorMessage(parsed.error)}`);
  }
  return parsed.data;
}

/** A handler's return as a CallToolResult. */
export function toResult(value: ToolReturn | undefined | null): CallToolResult {
  if (typeof value === 'string') return { content: [{ type: 'text', text: value }] };
  if (!value || typeof value !== 'object') return { content: [] };
  return value;
}

const MAX_FAILURE_MESSAGE_BYTES = 1024;

/** A failed result's first non-empty text line, at most 1 KiB: the task's status message. */
export function firstText(result: CallToolResult): string | undefined {
  const item = (result.content ?? []).find((c) => c.type === 'text') as { text?: unknown } | undefined;
  if (typeof item?.text !== 'string') return undefined;
  const line = item.text.split('\n').find((l) => l.trim() !== '')?.trim();
  if (line === undefined) return undefined;
  let cut = Buffer.from(line).subarray(0, MAX_FAILURE_MESSAGE_BYTES).toString('utf8');
  // A cut inside a character leaves U+FFFD at the end: drop it.
  if (Buffer.byteLength(line) > MAX_FAILURE_MESSAGE_BYTES) cut = cut.replace(/\uFFFD+$/, '');
  return cut;
}
