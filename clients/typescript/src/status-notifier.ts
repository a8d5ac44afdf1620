// TaskStatusNotifier: the SDK's own `notifications/tasks/status` for tasks
// that change outside this MCP server (a worker of the fleet, another MCP
// server replica, any other client of taskstore).
//
// The SDK (1.x, shared/protocol.js `requestTaskStore`) sends that
// notification only when a request handler changes a task through
// `extra.taskStore.updateTaskStatus` or `storeTaskResult`: it reads the task
// back and calls `this.notification({ method: 'notifications/tasks/status',
// params: task })` on the Server of the session, with no related request,
// which Streamable HTTP writes to the session's standalone (GET) SSE stream
// and stdio to stdout. A change made anywhere else reaches the store but
// never that call. This class watches followed tasks with WatchTask (one
// gRPC stream per task, any replica's changes) and makes the same call for
// every change, until the task is terminal. Runtime imports of the SDK are
// avoided on purpose: the SDK is an optional peer dependency.
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { Task } from '@modelcontextprotocol/sdk/types.js';
import { status as Status } from '@grpc/grpc-js';
import { isTerminalStatus } from './convert.js';
import { isNotFound, TaskStoreError } from './errors.js';
import { toMcpTask, type GrpcTaskStore } from './task-store.js';

export interface TaskStatusNotifierOptions {
  /** Most tasks followed at once (default 100); `follow` beyond it returns false and follows nothing. */
  maxTasks?: number;
  /**
   * Called with what ends a watch early (other than the task ending, being
   * deleted or expiring) and with notifications that could not be sent.
   * Default: the server's `onerror`.
   */
  onerror?: (error: Error) => void;
  /** Backoff before watching again after UNAVAILABLE or RESOURCE_EXHAUSTED, in ms (default 250, doubling to 5000). */
  retryMs?: { initial?: number; max?: number };
}

export interface FollowOptions {
  /**
   * The SDK session the task was created in (`extra.sessionId`), mapped to
   * the service's session by the store's `mapSessionId`. Default: the
   * session of the server's transport, which is the same thing.
   */
  sessionId?: string;
}

const RETRYABLE = new Set<number>([Status.UNAVAILABLE, Status.RESOURCE_EXHAUSTED]);

/**
 * Sends `notifications/tasks/status` (the full task, as `tasks/get` returns
 * it) to the client of one MCP session for each change of the tasks it
 * follows, wherever the change was made. Make one per McpServer (the SDK's
 * servers serve one session each) and call `follow(task)` where a handler
 * hands a task's work to someone else, e.g. with `context.dispatch`.
 */
export class TaskStatusNotifier {
  private readonly server: Server;
  private readonly followed = new Map<string, AbortController>();
  private readonly maxTasks: number;
  private readonly onerror: ((error: Error) => void) | undefined;
  private readonly retryInitialMs: number;
  private readonly retryMaxMs: number;
  private closed = false;

  /**
   * Stops by itself when the server's connection closes (it chains onto the
   * Server's `onclose`; set your own before making the notifier, or call
   * `close()` from it).
   */
  constructor(
    server: McpServer | Server,
    private readonly store: GrpcTaskStore,
    options: TaskStatusNotifierOptions = {},
  ) {
    this.server = 'notification' in server ? server : server.server;
    this.maxTasks = options.maxTasks ?? 100;
    this.onerror = options.onerror;
    this.retryInitialMs = options.retryMs?.initial ?? 250;
    this.retryMaxMs = options.retryMs?.max ?? 5000;
    const previous = this.server.onclose;
    this.server.onclose = () => {
      this.close();
      previous?.();
    };
  }

  /** How many tasks are followed now. */
  get following(): number {
    return this.followed.size;
  }

  /**
   * Follows a task until it is terminal, deleted or expired, or until
   * `unfollow`/`close`. Given the task as the client last saw it (the one a
   * handler returns in its CreateTaskResult), only later changes are sent;
   * given an id, its current state is sent first. Returns false, following
   * nothing, for a terminal task, once closed, or at `maxTasks`; a task
   * followed already stays followed (true).
   */
  follow(task: Task | string, options: FollowOptions = {}): boolean {
    const taskId = typeof task === 'string' ? task : task.taskId;
    if (this.followed.has(taskId)) return true;
    if (this.closed || this.followed.size >= this.maxTasks) return false;
    if (typeof task !== 'string' && isTerminalStatus(task.status)) return false;
    const abort = new AbortController();
    this.followed.set(taskId, abort);
    const scope = this.store.session(options.sessionId ?? this.server.transport?.sessionId);
    const seen = typeof task === 'string' ? undefined : stateOf(task);
    this.watch(taskId, scope, seen, abort.signal)
      .catch((err: unknown) => this.report(err))
      .finally(() => {
        if (this.followed.get(taskId) === abort) this.followed.delete(taskId);
      });
    return true;
  }

  /** Stops following a task; nothing more is sent for it. */
  unfollow(taskId: string): void {
    this.followed.get(taskId)?.abort();
    this.followed.delete(taskId);
  }

  /** Stops following every task (their WatchTask streams are cancelled); `follow` returns false from now on. */
  close(): void {
    this.closed = true;
    for (const abort of this.followed.values()) abort.abort();
    this.followed.clear();
  }

  private async watch(taskId: string, scope: { sessionId?: string }, seen: string | undefined, signal: AbortSignal): Promise<void> {
    let delay = this.retryInitialMs;
    let terminal = false;
    while (!signal.aborted) {
      try {
        for await (const stored of this.store.client.watchTask(taskId, { ...scope, signal })) {
          delay = this.retryInitialMs;
          terminal = isTerminalStatus(stored.status);
          const task = toMcpTask(stored);
          // The first message of every watch is the task as it is: skip it
          // when the client has it already (after `follow(task)`, or after
          // watching again).
          const state = stateOf(task);
          if (state === seen) continue;
          seen = state;
          if (!(await this.send(task))) return;
        }
        // The service ends the stream once the task is terminal.
        if (terminal) return;
      } catch (err) {
        if (signal.aborted || isNotFound(err)) return;
        if (!(err instanceof TaskStoreError && RETRYABLE.has(err.code))) throw err;
      }
      // A replica shutting down, or the tenant's waiting calls at their
      // limit: watch again (its first message is the task as it is now).
      await pause(delay, signal);
      delay = Math.min(delay * 2, this.retryMaxMs);
    }
  }

  /** False once the server is not connected any more (then everything stops). */
  private async send(task: Task): Promise<boolean> {
    if (this.server.transport === undefined) {
      this.close();
      return false;
    }
    try {
      await this.server.notification({ method: 'notifications/tasks/status', params: task });
    } catch (err) {
      if (this.server.transport === undefined) {
        this.close();
        return false;
      }
      this.report(err);
    }
    return true;
  }

  private report(err: unknown): void {
    const error = err instanceof Error ? err : new Error(String(err));
    (this.onerror ?? this.server.onerror)?.(error);
  }
}

/** What a status notification tells: the same state twice is sent once. */
function stateOf(task: Task): string {
  return JSON.stringify([task.status, task.statusMessage ?? null, task.lastUpdatedAt]);
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
