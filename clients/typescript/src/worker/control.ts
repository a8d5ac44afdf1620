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
  const off = onAbort(signal, () => waiting.abort());
  try {
    return await Promise.race([settled.then(() => true), sleep(ms, waiting.signal).then(() => false)]);
  } finally {
    off();
    waiting.abort(); // the timer of the wait that lost
  }
}

/** The callbacks waiting on each shared signal (see `onAbort`). */
const waitingOn = new WeakMap<AbortSignal, Set<() => void>>();

/**
 * Calls `callback` once when `signal` aborts (at once if it has); returns
 * what stops that. For signals every running attempt waits on (the worker's
 * shutdown, its session's end): Node's EventTarget walks all of a signal's
 * listeners on every add and remove, so thousands of attempts each adding
 * their own cost time quadratic in their number. Here the signal has one
 * listener, and each attempt an entry in a set.
 */
export function onAbort(signal: AbortSignal, callback: () => void): () => void {
  if (signal.aborted) {
    callback();
    return () => {};
  }
  let callbacks = waitingOn.get(signal);
  if (callbacks === undefined) {
    const all = new Set<() => void>();
    callbacks = all;
    waitingOn.set(signal, all);
    signal.addEventListener(
      'abort',
      () => {
        waitingOn.delete(signal);
        for (const call of all) call();
      },
      { once: true },
    );
  }
  const entry = () => callback(); // its own identity: the same callback may wait twice
  const waiting = callbacks;
  waiting.add(entry);
  return () => {
    waiting.delete(entry);
  };
}
