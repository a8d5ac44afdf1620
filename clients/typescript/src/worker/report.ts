// Reports from a running attempt (worker/src/report.rs, asking.rs), each
// fenced by the attempt's lease so that a worker that lost its task cannot
// touch it: progress (best effort), the result or a release (retried while
// the service is unreachable, up to a minute), and questions.
import { status as Status } from '@grpc/grpc-js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { msToDuration } from '../convert.js';
import { TaskStoreError } from '../errors.js';
import type { WireReleaseReason } from '../wire.js';
import { REFUSAL_STATUS_KEY, REFUSED_LEASE_LOST, REFUSED_TERMINAL, type StopReason } from '../protocol.js';
import { sleep, type Control } from './control.js';
import type { Logger } from './log.js';
import type { CallScope, WorkerRpc } from './rpc.js';
import { AskError, type InputRequestBody } from './tool.js';

/** How long a final report is retried while the service is unreachable; past the lease the task belongs to someone else anyway. */
const REPORT_RETRY_FOR_MS = 60_000;
/** How often a waiting question asks again even when no change was heard. */
const ASK_AGAIN_EVERY_MS = 5000;

export type Reported = { kind: 'stored' } | { kind: 'refused'; reason: string } | { kind: 'unreachable'; error: string };

// Refusals a retry will not change: the lease is lost, the task ended or is
// gone, the request is malformed, or the credentials are refused.
const REFUSED = new Set<number>([Status.FAILED_PRECONDITION, Status.NOT_FOUND, Status.INVALID_ARGUMENT, Status.UNAUTHENTICATED, Status.PERMISSION_DENIED]);

const codeOf = (err: unknown) => (err instanceof TaskStoreError ? err.code : Status.UNKNOWN);

/**
 * Why an attempt must stop, when the service refused one of its reports
 * because the attempt is over: its task ended (a cancellation this worker
 * has not heard of yet) or another claim holds it. The attempt's follow says
 * so within moments as a rule; a refused report is the same news, already
 * paid for, should the follow have missed it.
 */
export function stopOfRefusal(err: unknown): StopReason | undefined {
  if (!(err instanceof TaskStoreError)) return undefined;
  if (err.code === Status.NOT_FOUND) return 'gone';
  if (err.code !== Status.FAILED_PRECONDITION) return undefined;
  if (err.reason === REFUSED_TERMINAL) return err.metadata[REFUSAL_STATUS_KEY] === 'cancelled' ? 'cancelled' : 'finished';
  if (err.reason === REFUSED_LEASE_LOST) return 'lease_lost';
  return undefined;
}

export class Reporter {
  constructor(
    private readonly rpc: WorkerRpc,
    readonly tenantId: string,
    readonly taskId: string,
    readonly leaseToken: string,
    readonly traceparent: string | undefined,
    private readonly log: Logger,
  ) {}

  get scope(): CallScope & { tenant: string } {
    return { tenant: this.tenantId, traceparent: this.traceparent };
  }

  /**
   * Progress is best effort: a lost update is not worth failing the task.
   * Resolves to why the attempt must stop when the service refused the
   * update because the attempt is over; to undefined otherwise, stored or not.
   */
  async status(status: 'working' | 'input_required', message: string): Promise<StopReason | undefined> {
    try {
      await this.rpc.updateStatus(
        {
          taskId: this.taskId,
          status: status === 'working' ? 'TASK_STATUS_WORKING' : 'TASK_STATUS_INPUT_REQUIRED',
          statusMessage: message,
          leaseToken: this.leaseToken,
        },
        this.scope,
      );
    } catch (err) {
      this.log.warn('progress update not stored', { task_id: this.taskId, error: (err as Error).message });
      return stopOfRefusal(err);
    }
    return undefined;
  }

  /** Stores the result: COMPLETED, or FAILED when it says `isError: true`. */
  result(result: CallToolResult, failed: boolean, message: string | undefined): Promise<Reported> {
    return this.retrying(() =>
      this.rpc.storeResult(
        {
          taskId: this.taskId,
          status: failed ? 'TASK_STATUS_FAILED' : 'TASK_STATUS_COMPLETED',
          resultJson: JSON.stringify(result),
          ...(message !== undefined && { statusMessage: message }),
          leaseToken: this.leaseToken,
        },
        this.scope,
      ),
    );
  }

  /** Gives the task back: a retryable error, a shutdown, a park, or a back-off until `backOffUntil`. */
  release(reason: WireReleaseReason, message: string, backOffUntil?: Date): Promise<Reported> {
    const until = backOffUntil === undefined ? {} : { backOffUntil: msToDuration(Math.max(0, backOffUntil.getTime())) };
    return this.retrying(() =>
      this.rpc.release({ taskId: this.taskId, leaseToken: this.leaseToken, reason, message, tenantId: this.tenantId, ...until }, this.scope),
    );
  }

  private async retrying(call: () => Promise<unknown>): Promise<Reported> {
    const deadline = Date.now() + REPORT_RETRY_FOR_MS;
    let delay = 100;
    for (;;) {
      try {
        await call();
        return { kind: 'stored' };
      } catch (err) {
        if (REFUSED.has(codeOf(err))) return { kind: 'refused', reason: (err as Error).message };
        if (Date.now() >= deadline) return { kind: 'unreachable', error: (err as Error).message };
        this.log.warn('report failed; retrying', { task_id: this.taskId, error: (err as Error).message });
        await sleep(delay);
        delay = Math.min(delay * 2, 5000);
      }
    }
  }

  /**
   * Asks `request` under `key` and waits for the answer, asking again after
   * each change of the task (the attempt's watch) and every 5 s; parks the
   * attempt when no answer came within `control.parkAfterMs`.
   */
  async ask(control: Control, key: string, request: InputRequestBody): Promise<Record<string, unknown>> {
    const requestJson = JSON.stringify(request);
    const parkAt = Date.now() + control.parkAfterMs;
    let retry = 100;
    for (;;) {
      if (control.stopped) throw new AskError('stopped', 'the attempt was stopped while it waited for an answer');
      // Listen before asking: a change between "not yet" and the wait must not be missed.
      const changed = control.nextChange();
      let wait: number;
      try {
        const res = await this.rpc.ask({ taskId: this.taskId, leaseToken: this.leaseToken, tenantId: this.tenantId, key, requestJson }, this.scope);
        if (res.answerJson !== undefined && res.answerJson !== null) return JSON.parse(res.answerJson) as Record<string, unknown>;
        retry = 100;
        wait = ASK_AGAIN_EVERY_MS;
      } catch (err) {
        const code = codeOf(err);
        const reason = err instanceof TaskStoreError ? err.reason : undefined;
        if (code === Status.INVALID_ARGUMENT || (code === Status.FAILED_PRECONDITION && reason?.startsWith('QUESTION_'))) {
          throw new AskError('refused', `the question was refused: ${(err as Error).message}`);
        }
        // The lease is lost or the task ended: the attempt's guards stop it.
        if (code === Status.FAILED_PRECONDITION || code === Status.NOT_FOUND) {
          throw new AskError('stopped', 'the attempt was stopped while it waited for an answer');
        }
        this.log.warn('asking failed; retrying', { task_id: this.taskId, error: (err as Error).message });
        retry = Math.min(retry * 2, 2000);
        wait = retry;
      }
      const untilPark = parkAt - Date.now();
      if (untilPark <= 0) return this.park(control, key);
      let timer: NodeJS.Timeout | undefined;
      const woke = await Promise.race([
        changed.then(() => 'changed' as const),
        new Promise<'timer' | 'park'>((resolve) => {
          timer = setTimeout(() => resolve(wait < untilPark ? 'timer' : 'park'), Math.min(wait, untilPark));
        }),
      ]);
      clearTimeout(timer);
      if (woke === 'park') return this.park(control, key);
    }
  }

  private park(control: Control, key: string): never {
    this.log.info('no answer yet; parking the attempt', { task_id: this.taskId, key, waited_secs: control.parkAfterMs / 1000 });
    control.stop('parked');
    throw new AskError('parked', 'the question waits for its answer without a worker');
  }
}
