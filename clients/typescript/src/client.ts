// A typed, promise-based client of the whole mcp.tasks.v1.TaskStore API, for
// services that talk to taskstore without the MCP SDK (and the transport
// under GrpcTaskStore).
import * as grpc from '@grpc/grpc-js';
import { resolveChannel, resolveTenant, TENANT_METADATA, type ConnectionOptions } from './channel.js';
import {
  durationToMs,
  inputRequestFromWire,
  msToDuration,
  statusToWire,
  taskFromWire,
  timestampToIso,
  type InputRequest,
  type StoredTask,
  type TaskStatus,
} from './convert.js';
import { fromServiceError } from './errors.js';
import { stopReasonFromWire, type StopReason } from './protocol.js';
import { taskStoreServiceClient } from './proto.js';
import type {
  WireAnswerInputRequestsRequest,
  WireAnswerInputRequestsResponse,
  WireCleanupExpiredResponse,
  WireCreateTaskRequest,
  WireGetTaskResultResponse,
  WireHoldTaskRequest,
  WireHoldTaskResponse,
  WireListInputRequestsResponse,
  WireListTasksResponse,
  WireListToolsResponse,
  WireTask,
} from './wire.js';

export interface ClientOptions extends ConnectionOptions {
  /** Deadline of every call that does not wait, in ms (default 10 s). */
  timeoutMs?: number;
  /** Deadline of a waiting GetTaskResult, in ms (default 10 min, the service's default longest wait). */
  waitTimeoutMs?: number;
}

/** Per-call options. */
export interface CallOptions {
  /** Overrides the client's deadline for this call (ms). */
  timeoutMs?: number;
  /** Aborts the call. */
  signal?: AbortSignal;
  /**
   * A W3C `traceparent` to send with the call, so the service's span (and,
   * for CreateTask with dispatch, the job and the worker's attempt) joins
   * the caller's trace.
   */
  traceparent?: string;
}

export interface SessionCallOptions extends CallOptions {
  /** Restricts the call to this session's tasks (another session's task is NOT_FOUND). */
  sessionId?: string;
}

export type RequestId = string | number;

export interface CreateTaskParams {
  /** A caller-chosen id (1-128 printable ASCII, no spaces); unset: the service generates one. */
  taskId?: string;
  sessionId?: string;
  /** Retention in ms; `null`: keep until deleted (granted only without a server max ttl); unset: server default. */
  ttl?: number | null;
  /** Suggested poll interval in ms; the service clamps it to its bounds. */
  pollInterval?: number;
  /** The JSON-RPC id of the request that made the task. */
  requestId: RequestId;
  /** The JSON-RPC request that made the task (e.g. a `tools/call`), as an object. */
  request: object;
  /**
   * Run the task on a worker of the fleet instead of reporting progress yourself. `startAt` (not before
   * this time) or `startAfterMs` (this long after its creation) makes it wait, `working`, until then.
   * `priority` (0 to 9) puts it ahead of lower ones in its tool's backlog while the tool's workers are busy.
   */
  dispatch?: { tool?: string; maxAttempts?: number; startAt?: Date; startAfterMs?: number; priority?: number };
  /**
   * Makes the create safe to retry (1-255 bytes, unique per tenant): while the task first created with
   * this key lives (and for the service's idempotency retention), the same create returns that task;
   * the key with another request fails with FAILED_PRECONDITION.
   */
  idempotencyKey?: string;
}

/** The `_meta` entry of a `tools/call` that carries its idempotency key, as `/mcp` reads it too. */
export const IDEMPOTENCY_META_KEY = 'mcp-taskstore/idempotency-key';

/** The `_meta` entries of a `tools/call` that name when its dispatched task starts, as `/mcp` reads them. */
export const START_AT_META_KEY = 'mcp-taskstore/start-at';
export const START_AFTER_META_KEY = 'mcp-taskstore/start-after-ms';

/** The start a request's `params._meta` names, if any; one that does not read as a start is refused. */
export function startOf(meta: unknown): { startAt?: Date; startAfterMs?: number } {
  if (!meta || typeof meta !== 'object') return {};
  const entries = meta as Record<string, unknown>;
  const at = entries[START_AT_META_KEY];
  const after = entries[START_AFTER_META_KEY];
  if (at !== undefined && after !== undefined) throw new TypeError(`_meta names both "${START_AT_META_KEY}" and "${START_AFTER_META_KEY}"`);
  if (at !== undefined) {
    const startAt = typeof at === 'string' ? new Date(at) : undefined;
    if (!startAt || Number.isNaN(startAt.getTime())) throw new TypeError(`_meta["${START_AT_META_KEY}"] must be an RFC 3339 time`);
    return { startAt };
  }
  if (after !== undefined) {
    if (typeof after !== 'number' || !Number.isSafeInteger(after) || after < 0) throw new TypeError(`_meta["${START_AFTER_META_KEY}"] must be milliseconds`);
    return { startAfterMs: after };
  }
  return {};
}

/** The idempotency key in a request's `params._meta`, if any; a key that is not a string is refused. */
export function idempotencyKeyOf(meta: unknown): string | undefined {
  if (!meta || typeof meta !== 'object') return undefined;
  const key = (meta as Record<string, unknown>)[IDEMPOTENCY_META_KEY];
  if (key === undefined) return undefined;
  if (typeof key !== 'string') throw new TypeError(`_meta["${IDEMPOTENCY_META_KEY}"] must be a string`);
  return key;
}

export interface UpdateStatusParams {
  taskId: string;
  status: TaskStatus;
  /** Unset clears the message. */
  statusMessage?: string;
  sessionId?: string;
  leaseToken?: string;
}

export interface StoreResultParams {
  taskId: string;
  status: 'completed' | 'failed';
  /** The result object (for a tool call, the CallToolResult). */
  result: object;
  statusMessage?: string;
  sessionId?: string;
  leaseToken?: string;
}

export interface TaskResult<R = unknown> {
  status: 'completed' | 'failed';
  result: R;
  task: StoredTask;
}

export interface ListTasksParams extends SessionCallOptions {
  cursor?: string;
  pageSize?: number;
  statuses?: TaskStatus[];
  tool?: string;
}

export interface ServedTool {
  name: string;
  workers: number;
  slots: number;
  busy: number;
  lastSeenAt: string;
  /** What the tool is, as the latest report of a worker that described it says (MCP clients see this in tools/list). */
  description?: {
    title?: string;
    description?: string;
    /** The JSON Schema of its arguments. */
    inputSchema: Record<string, unknown>;
    taskSupport: 'optional' | 'required' | 'forbidden';
  };
}

/** What `holdTask` answered. */
export interface HoldTaskResult {
  /** Pass it with every renewal, progress update and the result. */
  leaseToken: string;
  /** Renew before this runs out (ms); a third of it is a safe cadence. */
  leaseDurationMs: number;
  /** False: stop running the tool; `stopReason` and `reason` say why. */
  keepRunning: boolean;
  reason: string;
  stopReason: StopReason;
}

/** What `answerInputRequests` did. */
export interface AnsweredInputRequests {
  /** The task after the answers: `working` once none is open, else still `input_required`. */
  task: StoredTask;
  /** The keys whose answers were stored. */
  taken: string[];
  /** The keys whose answers were ignored: unknown, or answered before. */
  ignored: string[];
}

type Unary = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => grpc.ClientUnaryCall;

export class TaskStoreClient {
  private readonly client: grpc.Client;
  private readonly token: string | undefined;
  /** The tenant every call names (`x-taskstore-tenant`), if any. */
  readonly tenant: string | undefined;
  private readonly timeoutMs: number;
  private readonly waitTimeoutMs: number;

  constructor(options: ClientOptions) {
    // Checked first: a bad tenant is a usage error, before any channel exists.
    this.tenant = resolveTenant(options);
    const { address, credentials, options: channelOptions } = resolveChannel(options);
    const Ctor = taskStoreServiceClient();
    this.client = new Ctor(address, credentials, channelOptions);
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.waitTimeoutMs = options.waitTimeoutMs ?? 600_000;
  }

  /** Closes the channel; calls in flight fail with CANCELLED. */
  close(): void {
    this.client.close();
  }

  async createTask(params: CreateTaskParams, opts?: CallOptions): Promise<StoredTask> {
    const req: WireCreateTaskRequest = {
      requestIdJson: JSON.stringify(params.requestId),
      requestJson: JSON.stringify(params.request),
    };
    if (params.taskId !== undefined) req.taskId = params.taskId;
    if (params.sessionId !== undefined) req.sessionId = params.sessionId;
    if (params.ttl === null) req.noExpiry = true;
    else if (params.ttl !== undefined) req.ttl = msToDuration(params.ttl);
    if (params.pollInterval !== undefined) req.pollInterval = msToDuration(params.pollInterval);
    if (params.dispatch) {
      const { startAt, startAfterMs, ...dispatch } = params.dispatch;
      req.dispatch = { ...dispatch };
      if (startAt !== undefined) req.dispatch.startAt = msToDuration(startAt.getTime());
      if (startAfterMs !== undefined) req.dispatch.startAfter = msToDuration(startAfterMs);
    }
    if (params.idempotencyKey !== undefined) req.idempotencyKey = params.idempotencyKey;
    return taskFromWire(await this.unary<WireTask>('createTask', 'CreateTask', req, opts));
  }

  async getTask(taskId: string, opts?: SessionCallOptions): Promise<StoredTask> {
    return taskFromWire(await this.unary<WireTask>('getTask', 'GetTask', ref(taskId, opts), opts));
  }

  async updateTaskStatus(params: UpdateStatusParams, opts?: CallOptions): Promise<StoredTask> {
    const req = { ...ref(params.taskId, params), status: statusToWire(params.status), ...optional(params, 'statusMessage', 'leaseToken') };
    return taskFromWire(await this.unary<WireTask>('updateTaskStatus', 'UpdateTaskStatus', req, opts));
  }

  async storeTaskResult(params: StoreResultParams, opts?: CallOptions): Promise<StoredTask> {
    const req = {
      ...ref(params.taskId, params),
      status: statusToWire(params.status),
      resultJson: JSON.stringify(params.result),
      ...optional(params, 'statusMessage', 'leaseToken'),
    };
    return taskFromWire(await this.unary<WireTask>('storeTaskResult', 'StoreTaskResult', req, opts));
  }

  /**
   * The stored result of a terminal task. With `wait`, blocks until the task
   * is terminal (deadline: `waitTimeoutMs` unless `timeoutMs` is given).
   */
  async getTaskResult<R = unknown>(taskId: string, opts?: SessionCallOptions & { wait?: boolean }): Promise<TaskResult<R>> {
    const wait = opts?.wait === true;
    const callOpts = { ...opts, timeoutMs: opts?.timeoutMs ?? (wait ? this.waitTimeoutMs : this.timeoutMs) };
    const res = await this.unary<WireGetTaskResultResponse>('getTaskResult', 'GetTaskResult', { ...ref(taskId, opts), wait }, callOpts);
    const task = taskFromWire(res.task!);
    return { status: task.status as 'completed' | 'failed', result: JSON.parse(res.resultJson) as R, task };
  }

  async listTasks(params?: ListTasksParams): Promise<{ tasks: StoredTask[]; nextCursor?: string }> {
    const req = {
      ...optional(params ?? {}, 'cursor', 'sessionId', 'pageSize', 'tool'),
      statuses: (params?.statuses ?? []).map(statusToWire),
    };
    const res = await this.unary<WireListTasksResponse>('listTasks', 'ListTasks', req, params);
    const out: { tasks: StoredTask[]; nextCursor?: string } = { tasks: res.tasks.map(taskFromWire) };
    if (res.nextCursor) out.nextCursor = res.nextCursor;
    return out;
  }

  /**
   * Yields the task as it is now and after every change until it is terminal.
   * No deadline unless `timeoutMs` is given; stop early with `signal` or by
   * leaving the loop.
   */
  async *watchTask(taskId: string, opts?: SessionCallOptions): AsyncGenerator<StoredTask, void, undefined> {
    const callOpts: grpc.CallOptions = {};
    if (opts?.timeoutMs !== undefined) callOpts.deadline = Date.now() + opts.timeoutMs;
    const method = (this.client as unknown as Record<string, (req: unknown, md: grpc.Metadata, o: grpc.CallOptions) => grpc.ClientReadableStream<WireTask>>).watchTask!;
    const call = method.call(this.client, ref(taskId, opts), this.metadata(opts), callOpts);
    const onAbort = () => call.cancel();
    opts?.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for await (const t of call as AsyncIterable<WireTask>) yield taskFromWire(t);
    } catch (err) {
      throw fromServiceError(err, 'WatchTask');
    } finally {
      opts?.signal?.removeEventListener('abort', onAbort);
      call.cancel(); // no-op once the stream ended; frees it when the caller broke out early
    }
  }

  /** Cancels a task; a terminal task comes back unchanged. */
  async cancelTask(taskId: string, opts?: SessionCallOptions): Promise<StoredTask> {
    return taskFromWire(await this.unary<WireTask>('cancelTask', 'CancelTask', ref(taskId, opts), opts));
  }

  /** Deletes a task and its result, whatever its status. */
  async deleteTask(taskId: string, opts?: SessionCallOptions): Promise<void> {
    await this.unary<unknown>('deleteTask', 'DeleteTask', ref(taskId, opts), opts);
  }

  /** Deletes expired tasks now; returns how many. */
  async cleanupExpired(opts?: CallOptions): Promise<number> {
    const res = await this.unary<WireCleanupExpiredResponse>('cleanupExpired', 'CleanupExpired', {}, opts);
    return Number(res.deleted);
  }

  /** The tools the worker fleet serves now. */
  async listTools(opts?: CallOptions): Promise<ServedTool[]> {
    const res = await this.unary<WireListToolsResponse>('listTools', 'ListTools', {}, opts);
    return res.tools.map((t) => {
      const tool: ServedTool = { name: t.name, workers: t.workers, slots: t.slots, busy: t.busy, lastSeenAt: timestampToIso(t.lastSeenAt) };
      const d = t.description;
      if (d) {
        tool.description = {
          ...(d.title && { title: d.title }),
          ...(d.description && { description: d.description }),
          inputSchema: d.inputSchemaJson ? (JSON.parse(d.inputSchemaJson) as Record<string, unknown>) : { type: 'object' },
          taskSupport: d.taskSupport === 'TASK_SUPPORT_REQUIRED' ? 'required' : d.taskSupport === 'TASK_SUPPORT_FORBIDDEN' ? 'forbidden' : 'optional',
        };
      }
      return tool;
    });
  }

  /**
   * The questions (MCP input requests) the task's tool asked, open and
   * answered, in the order asked. A question is open while `answer` is
   * absent; the task is `input_required` while any is.
   */
  async listInputRequests(taskId: string, opts?: SessionCallOptions): Promise<InputRequest[]> {
    const res = await this.unary<WireListInputRequestsResponse>('listInputRequests', 'ListInputRequests', ref(taskId, opts), opts);
    return res.inputRequests.map(inputRequestFromWire);
  }

  /**
   * Answers open questions by key: each answer is the MCP result the
   * question asks for (an `ElicitResult` such as `{ action: 'accept',
   * content: {...} }`, a `CreateMessageResult` or a `ListRootsResult`).
   * Answers to unknown or already answered keys change nothing and come
   * back in `ignored`. A task that waits without a worker is dispatched
   * again once its last question is answered. A finished task is
   * FAILED_PRECONDITION.
   */
  async answerInputRequests(
    taskId: string,
    answers: Record<string, object>,
    opts?: SessionCallOptions,
  ): Promise<AnsweredInputRequests> {
    const answersJson: Record<string, string> = {};
    for (const [key, answer] of Object.entries(answers)) answersJson[key] = JSON.stringify(answer);
    const req: WireAnswerInputRequestsRequest = { ...ref(taskId, opts), answersJson };
    const res = await this.unary<WireAnswerInputRequestsResponse>('answerInputRequests', 'AnswerInputRequests', req, opts);
    return { task: taskFromWire(res.task!), taken: res.taken, ignored: res.ignored };
  }

  /**
   * Holds a task this process runs itself (an MCP SDK server running a
   * tool in its own process): a first hold (no `leaseToken`) gives the task
   * a lease of one attempt; call again with the token before
   * `leaseDurationMs` runs out to renew it. `keepRunning: false` says stop
   * (cancelled, ended, or the lease lapsed). A holder that stops renewing
   * leaves the task `failed` by the service's lease reaper, naming
   * `holder`. `GrpcTaskStore` does all this by itself.
   */
  async holdTask(
    taskId: string,
    params: { holder: string; leaseToken?: string; sessionId?: string },
    opts?: CallOptions,
  ): Promise<HoldTaskResult> {
    const req: WireHoldTaskRequest = { ...ref(taskId, params), holder: params.holder, leaseToken: params.leaseToken ?? '' };
    const res = await this.unary<WireHoldTaskResponse>('holdTask', 'HoldTask', req, opts);
    return {
      leaseToken: res.leaseToken,
      leaseDurationMs: res.leaseDuration ? durationToMs(res.leaseDuration) : 15_000,
      keepRunning: res.keepRunning,
      reason: res.reason,
      stopReason: stopReasonFromWire(res.stopReason),
    };
  }

  private metadata(opts?: CallOptions): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set('authorization', `Bearer ${this.token}`);
    if (this.tenant !== undefined) md.set(TENANT_METADATA, this.tenant);
    if (opts?.traceparent) md.set('traceparent', opts.traceparent);
    return md;
  }

  private unary<T>(method: string, rpc: string, req: unknown, opts?: CallOptions): Promise<T> {
    const fn = (this.client as unknown as Record<string, Unary>)[method]!;
    const deadline = Date.now() + (opts?.timeoutMs ?? this.timeoutMs);
    return new Promise<T>((resolve, reject) => {
      if (opts?.signal?.aborted) {
        reject(fromServiceError({ code: grpc.status.CANCELLED, details: 'aborted before the call' }, rpc));
        return;
      }
      const call = fn.call(this.client, req, this.metadata(opts), { deadline }, (err, res) => {
        opts?.signal?.removeEventListener('abort', onAbort);
        if (err) reject(fromServiceError(err, rpc));
        else resolve(res as T);
      });
      const onAbort = () => call.cancel();
      opts?.signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

function ref(taskId: string, opts?: { sessionId?: string | undefined }): { taskId: string; sessionId?: string } {
  return opts?.sessionId !== undefined ? { taskId, sessionId: opts.sessionId } : { taskId };
}

// Copies only the keys that are set: proto3 `optional` fields must be absent,
// not empty, when unset.
function optional<T extends object, K extends keyof T>(src: T, ...keys: K[]): Partial<Pick<T, K>> {
  const out: Partial<Pick<T, K>> = {};
  for (const k of keys) if (src[k] !== undefined) out[k] = src[k];
  return out;
}
