// What steers one running attempt (worker/src/control.rs): the signal its
// tool watches, why it was stopped (decided once, the first reason wins),
// and the news that its task changed (for a tool waiting for an answer).
import { TaskStopped, type StopReason } from '../protocol.js';

/** Why an attempt stopped before its tool finished. */
export type StopCause = StopReason | 'shutdown' | 'parked';

export class Control {
  private readonly controller = new AbortController();
  private cause: StopCause | undefined;
  private waiters: Array<() => void> = [];

  constructor(readonly parkAfterMs: number) {}

  /** Aborted when the attempt must stop; its reason is a `TaskStopped`. */
  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Why it stopped, once it did. */
  get stopped(): StopCause | undefined {
    return this.cause;
  }

  stop(cause: StopCause, message?: string): void {
    if (this.cause !== undefined) return;
    this.cause = cause;
    this.controller.abort(new TaskStopped(cause, message));
    this.changed();
  }

  /** The task changed (an answer may have come): wakes every `nextChange()`. */
  changed(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }

  /** Resolves at the next change (or stop). Take it before asking, so a change in between is not missed. */
  nextChange(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Whether `settled` resolves within `ms`: false after `ms`, or at once when `signal` aborts. */
export async function settledWithin(settled: Promise<unknown>, ms: number, signal: AbortSignal): Promise<boolean> {
  const waiting = new AbortController();
  const onAbort = () => waiting.abort();
  signal.addEventListener('abort', onAbort, { once: true });
  if (signal.aborted) waiting.abort();
  try {
    return await Promise.race([settled.then(() => true), sleep(ms, waiting.signal).then(() => false)]);
  } finally {
    signal.removeEventListener('abort', onAbort);
    waiting.abort(); // the timer of the wait that lost
  }
}
