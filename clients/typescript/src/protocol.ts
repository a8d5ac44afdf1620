// What every worker and holder says the same way, copied from the one place
// the service writes it (proto/src/protocol.rs, quoted in docs/execution.md):
// why an attempt must stop, the refusals that tell a worker its attempt is
// over, and the CallToolResult of a task that failed outside its tool.
import type { WireStopReason } from './wire.js';

/** The ErrorInfo `reason` of a report refused because the task is terminal. */
export const REFUSED_TERMINAL = 'FENCE_TERMINAL';
/** The ErrorInfo `reason` of a report under a lease that is not the task's current one. */
export const REFUSED_LEASE_LOST = 'FENCE_LEASE_LOST';
/** The ErrorInfo metadata key naming the task's status, where a refusal carries it. */
export const REFUSAL_STATUS_KEY = 'status';

/** Why a running tool must stop (and store nothing). */
export type StopReason = 'cancelled' | 'finished' | 'gone' | 'lease_lost' | 'unspecified';

export const STOP_CANCELLED = 'the task was cancelled';
export const STOP_FINISHED = 'the task finished without this attempt';
export const STOP_GONE = 'the task no longer exists (expired or deleted)';
export const STOP_LEASE_LOST = 'the lease was lost: the task was dispatched again';
export const STOP_UNSPECIFIED = 'the service said to stop';

const WORDS: Record<StopReason, string> = {
  cancelled: STOP_CANCELLED,
  finished: STOP_FINISHED,
  gone: STOP_GONE,
  lease_lost: STOP_LEASE_LOST,
  unspecified: STOP_UNSPECIFIED,
};

export function describeStop(reason: StopReason): string {
  return WORDS[reason];
}

export function stopReasonFromWire(reason: WireStopReason | string | undefined): StopReason {
  switch (reason) {
    case 'STOP_REASON_CANCELLED':
      return 'cancelled';
    case 'STOP_REASON_FINISHED':
      return 'finished';
    case 'STOP_REASON_GONE':
      return 'gone';
    case 'STOP_REASON_LEASE_LOST':
      return 'lease_lost';
    default:
      return 'unspecified';
  }
}

/** A CallToolResult with one text item and `isError: true`. */
export function errorResult(text: string): { content: Array<{ type: 'text'; text: string }>; isError: true } {
  return { content: [{ type: 'text', text }], isError: true };
}

/**
 * The reason a task's tool was told to stop, as `signal.reason` carries it:
 * an Error whose message is the service's words and whose `reason` is the
 * machine-readable cause.
 */
export class TaskStopped extends Error {
  readonly reason: StopReason | 'shutdown' | 'parked';
  constructor(reason: StopReason | 'shutdown' | 'parked', message?: string) {
    super(message ?? (reason === 'shutdown' ? 'the worker is shutting down' : reason === 'parked' ? 'the tool waits for an answer without a worker' : describeStop(reason)));
    this.name = 'TaskStopped';
    this.reason = reason;
  }
}
