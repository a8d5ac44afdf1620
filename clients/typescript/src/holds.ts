// The leases GrpcTaskStore keeps on the tasks its MCP server runs in its
// own process (docs/execution.md, "Tasks held by their caller"): a first
// HoldTask right after the task is created, a renewal every third of the
// lease, the token passed with progress and the result, and the tool told
// to stop (its AbortSignal) when the service says so. If this process dies,
// nobody renews: the service's lease reaper fails the task within lease +
// reaper interval (20 s by default), naming the holder, instead of leaving
// it `working` until its ttl.
import { hostname } from 'node:os';
import { basename } from 'node:path';
import { status as Status } from '@grpc/grpc-js';
import type { TaskStoreClient } from './client.js';
import { TaskStoreError } from './errors.js';
import { TaskStopped, type StopReason } from './protocol.js';

/** The holder name a store uses unless told otherwise: the program, its pid and host. */
export function defaultHolder(): string {
  const program = process.argv[1] ? basename(process.argv[1]) : 'node';
  return `mcp server ${program}, pid ${process.pid} on ${hostname()}`.slice(0, 256);
}

interface Held {
  sessionId: string | undefined;
  /** Empty until the first hold succeeds. */
  token: string;
  leaseMs: number;
  lastRenewed: number;
  controller: AbortController;
  timer: NodeJS.Timeout | undefined;
}

/** A first hold that failed for a passing reason is tried again this often. */
const RETRY_FIRST_HOLD_MS = 1000;

export class Holds {
  private readonly held = new Map<string, Held>();
  private closed = false;

  constructor(
    private readonly client: TaskStoreClient,
    readonly holder: string,
    private readonly onerror: (error: Error) => void,
  ) {}

  /**
   * Holds a task just created for this process to run. Resolves once the
   * service granted the lease, or the hold could not be made now (it is
   * then tried again in the background); rejects never.
   */
  async hold(taskId: string, sessionId: string | undefined): Promise<void> {
    if (this.closed) return;
    const entry: Held = { sessionId, token: '', leaseMs: 15_000, lastRenewed: Date.now(), controller: new AbortController(), timer: undefined };
    this.held.set(taskId, entry);
    await this.renew(taskId, entry);
  }

  /** The lease token to pass with a report on the task, if this process holds it. */
  token(taskId: string): string | undefined {
    const token = this.held.get(taskId)?.token;
    return token ? token : undefined;
  }

  /** Aborted when the task's tool must stop; undefined for a task not held here. */
  signal(taskId: string): AbortSignal | undefined {
    return this.held.get(taskId)?.controller.signal;
  }

  /** The task ended or must stop: no more renewals; its signal fires with `reason`. */
  end(taskId: string, reason: StopReason, message?: string): void {
    const entry = this.held.get(taskId);
    if (!entry) return;
    this.held.delete(taskId);
    clearTimeout(entry.timer);
    if (!entry.controller.signal.aborted) entry.controller.abort(new TaskStopped(reason, message));
  }

  /** How many tasks are held now. */
  get size(): number {
    return this.held.size;
  }

  /**
   * Stops renewing every lease (their tasks fail by the reaper once the
   * leases lapse, unless they end first) and fires their signals.
   */
  close(): void {
    this.closed = true;
    for (const taskId of [...this.held.keys()]) this.end(taskId, 'unspecified', 'the task store was closed');
  }

  private schedule(taskId: string, entry: Held, ms: number): void {
    if (this.held.get(taskId) !== entry) return;
    entry.timer = setTimeout(() => void this.renew(taskId, entry), ms);
    // A lease never keeps the process alive by itself.
    entry.timer.unref();
  }

  private async renew(taskId: string, entry: Held): Promise<void> {
    const first = entry.token === '';
    try {
      const res = await this.client.holdTask(taskId, {
        holder: this.holder,
        ...(entry.token && { leaseToken: entry.token }),
        ...(entry.sessionId !== undefined && { sessionId: entry.sessionId }),
      });
      if (this.held.get(taskId) !== entry) return; // ended meanwhile
      if (!res.keepRunning) return this.end(taskId, res.stopReason, res.reason || undefined);
      entry.token = res.leaseToken;
      entry.leaseMs = res.leaseDurationMs;
      entry.lastRenewed = Date.now();
      this.schedule(taskId, entry, Math.max(100, Math.floor(entry.leaseMs / 3)));
    } catch (err) {
      if (this.held.get(taskId) !== entry) return;
      const code = err instanceof TaskStoreError ? err.code : undefined;
      if (code === Status.NOT_FOUND) return this.end(taskId, 'gone');
      if (first && (code === Status.FAILED_PRECONDITION || code === Status.INVALID_ARGUMENT || code === Status.UNIMPLEMENTED)) {
        // Not a task this process can hold (not a tools/call, dispatched,
        // ended already) or a service without holds: run it unheld.
        this.held.delete(taskId);
        if (code !== Status.FAILED_PRECONDITION) this.onerror(err as Error);
        return;
      }
      if (!first && Date.now() - entry.lastRenewed >= entry.leaseMs) {
        // No renewal for a whole lease: the reaper may have ended the task.
        this.onerror(err as Error);
        return this.end(taskId, 'lease_lost');
      }
      this.schedule(taskId, entry, first ? RETRY_FIRST_HOLD_MS : Math.max(100, Math.floor(entry.leaseMs / 6)));
    }
  }
}
