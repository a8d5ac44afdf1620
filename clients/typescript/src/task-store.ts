// GrpcTaskStore: the MCP TypeScript SDK's TaskStore interface on top of the
// taskstore service, so an McpServer's tasks survive restarts and are shared
// by every replica. Mismatches with the SDK's in-memory store are settled in
// README.md ("How the SDK contract maps onto the service").
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { Request, RequestId, Result, Task } from '@modelcontextprotocol/sdk/types.js';
import { TaskStoreClient, idempotencyKeyOf, startOf, type ClientOptions, type CreateTaskParams } from './client.js';
import type { StoredTask, TaskStatus } from './convert.js';
import { isFailedPrecondition, isNotFound } from './errors.js';
import { defaultHolder, Holds } from './holds.js';

type CreateTaskOptions = Parameters<TaskStore['createTask']>[0];

export interface GrpcTaskStoreOptions extends ClientOptions {
  /** Tasks per `listTasks` page; unset: the service's default (100 unless configured). */
  pageSize?: number;
  /**
   * Decides which service session a task is filed under, given the SDK's
   * session id (the MCP transport session; undefined for stateless servers).
   * Default: that id itself. A Streamable HTTP session dies with its
   * connection, so tasks meant to outlive an MCP server process should be
   * scoped by something durable, e.g. the authenticated user.
   */
  mapSessionId?: (sdkSessionId: string | undefined) => string | undefined;
  /**
   * Hold every task this store creates for its MCP server to run in its own
   * process (not dispatched): a lease renewed every third of its duration,
   * so that a task whose server dies ends `failed` within lease + reaper
   * interval (20 s by default) instead of staying `working` until its ttl.
   * Default true. Turn it off when another process finishes the tasks this
   * store creates.
   */
  hold?: boolean;
  /** Who holds them, for status messages: default `mcp server <program>, pid N on <host>`. */
  holder?: string;
  /** Told about holds that could not be made or renewed; default: a warning on stderr. */
  onerror?: (error: Error) => void;
}

// The service's task id syntax. An id outside it cannot name a task, so
// getTask answers null without a round trip (the service would say
// INVALID_ARGUMENT, which the SDK has no use for).
const TASK_ID = /^[\x21-\x7e]{1,128}$/;

export class GrpcTaskStore implements TaskStore {
  /** The typed client underneath, for what the TaskStore interface lacks (dispatch, watch, delete, ...). */
  readonly client: TaskStoreClient;
  private readonly pageSize: number | undefined;
  private readonly mapSessionId: (sdkSessionId: string | undefined) => string | undefined;
  private readonly holds: Holds | undefined;

  constructor(options: GrpcTaskStoreOptions) {
    this.client = new TaskStoreClient(options);
    this.pageSize = options.pageSize;
    this.mapSessionId = options.mapSessionId ?? ((id) => id);
    if (options.hold !== false) {
      const onerror = options.onerror ?? ((err: Error) => process.emitWarning(`taskstore hold: ${err.message}`));
      this.holds = new Holds(this.client, options.holder ?? defaultHolder(), onerror);
    }
  }

  /**
   * Stops renewing the leases of held tasks (they fail by the service's
   * reaper unless they end first) and releases the gRPC channel.
   */
  close(): void {
    this.holds?.close();
    this.client.close();
  }

  /**
   * The signal of a task this store holds for its MCP server: aborted when
   * the tool must stop (the task was cancelled, ended elsewhere, expired, or
   * its lease was lost), with a `TaskStopped` reason saying which.
   * Undefined for a task not held here (dispatched, another process's, or
   * holds turned off).
   */
  abortSignal(taskId: string): AbortSignal | undefined {
    return this.holds?.signal(taskId);
  }

  /** Who holds this store's tasks, as their status messages say; undefined with holds off. */
  get holder(): string | undefined {
    return this.holds?.holder;
  }

  async createTask(taskParams: CreateTaskOptions, requestId: RequestId, request: Request, sessionId?: string): Promise<Task> {
    const params: CreateTaskParams = {
      requestId,
      // The SDK hands over method and params only; the service stores the
      // JSON-RPC request, so rebuild it around them.
      request: { jsonrpc: '2.0', id: requestId, method: request.method, ...(request.params !== undefined && { params: request.params }) },
    };
    Object.assign(params, this.session(sessionId));
    // undefined: the service's default ttl; null: keep until deleted (no_expiry).
    if (taskParams.ttl !== undefined) params.ttl = taskParams.ttl;
    if (taskParams.pollInterval !== undefined) params.pollInterval = taskParams.pollInterval;
    // A tool handler may ask for the fleet to run the task:
    // `extra.taskStore.createTask({ ttl, context: { dispatch: { tool: 'echo' } } })`.
    const dispatch = taskParams.context?.['dispatch'];
    if (dispatch && typeof dispatch === 'object') {
      params.dispatch = { ...startOf(request.params?._meta), ...(dispatch as NonNullable<CreateTaskParams['dispatch']>) };
    }
    // A client's retry of the call names the same key: the service answers with the first call's task.
    const idempotencyKey = idempotencyKeyOf(request.params?._meta);
    if (idempotencyKey !== undefined) params.idempotencyKey = idempotencyKey;
    const task = await this.client.createTask(params);
    // Not dispatched: this process runs it, so it holds it. The task is
    // returned as created (the hold only adds a status message).
    if (!params.dispatch && request.method === 'tools/call') await this.holds?.hold(task.taskId, params.sessionId);
    return toMcpTask(task);
  }

  async getTask(taskId: string, sessionId?: string): Promise<Task | null> {
    if (!TASK_ID.test(taskId)) return null;
    try {
      return toMcpTask(await this.client.getTask(taskId, this.session(sessionId)));
    } catch (err) {
      if (isNotFound(err)) return null;
      throw err;
    }
  }

  async storeTaskResult(taskId: string, status: 'completed' | 'failed', result: Result, sessionId?: string): Promise<void> {
    const leaseToken = this.holds?.token(taskId);
    try {
      await this.client.storeTaskResult({ taskId, status, result, ...this.session(sessionId), ...(leaseToken && { leaseToken }) });
    } catch (err) {
      this.ended(taskId, err);
      throw err;
    }
    this.holds?.end(taskId, 'finished');
  }

  async getTaskResult(taskId: string, sessionId?: string): Promise<Result> {
    // No wait: the SDK polls getTask itself and asks only once the task is terminal.
    const { result } = await this.client.getTaskResult<Result>(taskId, this.session(sessionId));
    return result;
  }

  async updateTaskStatus(taskId: string, status: Task['status'], statusMessage?: string, sessionId?: string): Promise<void> {
    const leaseToken = this.holds?.token(taskId);
    try {
      await this.client.updateTaskStatus({
        taskId,
        status: status as TaskStatus,
        ...(statusMessage !== undefined && { statusMessage }),
        ...this.session(sessionId),
        ...(leaseToken && { leaseToken }),
      });
    } catch (err) {
      this.ended(taskId, err);
      throw err;
    }
    // A task cancelled or ended through this store: its tool stops now.
    if (status === 'cancelled') this.holds?.end(taskId, 'cancelled');
    else if (status === 'completed' || status === 'failed') this.holds?.end(taskId, 'finished');
  }

  /** A report refused because the task is gone or moved on: its tool stops. */
  private ended(taskId: string, err: unknown): void {
    if (isNotFound(err)) this.holds?.end(taskId, 'gone');
    else if (isFailedPrecondition(err)) this.holds?.end(taskId, 'finished', (err as Error).message);
  }

  async listTasks(cursor?: string, sessionId?: string): Promise<{ tasks: Task[]; nextCursor?: string }> {
    const page = await this.client.listTasks({
      ...(cursor !== undefined && { cursor }),
      ...(this.pageSize !== undefined && { pageSize: this.pageSize }),
      ...this.session(sessionId),
    });
    const out: { tasks: Task[]; nextCursor?: string } = { tasks: page.tasks.map(toMcpTask) };
    if (page.nextCursor !== undefined) out.nextCursor = page.nextCursor;
    return out;
  }

  /** Deletes a task and its result now (not part of the SDK 1.x interface). */
  async deleteTask(taskId: string, sessionId?: string): Promise<void> {
    await this.client.deleteTask(taskId, this.session(sessionId));
  }

  /** `{ sessionId }` to spread into a request, or nothing for tenant-wide calls. */
  session(sdkSessionId: string | undefined): { sessionId?: string } {
    const sessionId = this.mapSessionId(sdkSessionId);
    return sessionId !== undefined ? { sessionId } : {};
  }
}

/** Drops the service's extras (session, tool) so the object is exactly an MCP Task. */
export function toMcpTask(t: StoredTask): Task {
  const task: Task = {
    taskId: t.taskId,
    status: t.status,
    ttl: t.ttl,
    createdAt: t.createdAt,
    lastUpdatedAt: t.lastUpdatedAt,
  };
  if (t.pollInterval !== undefined) task.pollInterval = t.pollInterval;
  if (t.statusMessage !== undefined) task.statusMessage = t.statusMessage;
  return task;
}
