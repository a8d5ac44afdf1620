// One claimed attempt (worker/src/attempt.rs): run the tool, keep the lease
// alive, stop within a moment of a cancellation, and report the outcome
// exactly once. A tool that does not return within the stop grace after
// its signal fired is left behind: the attempt ends without it, and nothing
// it reports afterwards counts (its progress is dropped, the lease fences
// the rest).
import { status as Status } from '@grpc/grpc-js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { durationToMs } from '../convert.js';
import { TaskStoreError } from '../errors.js';
import { errorResult, stopReasonFromWire } from '../protocol.js';
import type { WireClaimTaskResponse } from '../wire.js';
import { Control, onAbort, sleep } from './control.js';
import type { Logger } from './log.js';
import type { WorkerMetrics } from './metrics.js';
import { Reporter, type Reported } from './report.js';
import type { Followers } from './follow.js';
import type { WorkerRpc } from './rpc.js';
import { AskError, BackOff, firstText, RetryableError, toResult, validateArgs, type InputRequestBody, type ToolContext, type WorkerTool } from './tool.js';

/** How long an attempt runs before it follows its task for a cancellation (most tools finish sooner). */
const WATCH_AFTER_MS = 100;

export interface AttemptParams {
  rpc: WorkerRpc;
  log: Logger;
  metrics: WorkerMetrics;
  tool: WorkerTool;
  tenantId: string;
  taskId: string;
  claim: WireClaimTaskResponse;
  traceparent: string | undefined;
  parkAfterMs: number;
  stopGraceMs: number;
  /** Aborted when the worker's shutdown grace is over: the attempt gives its task back. */
  abandon: AbortSignal;
  /** Aborted when the worker session the attempt was claimed in is over; absent: claimed without one, the attempt renews its own lease. */
  sessionOver?: AbortSignal | undefined;
  /** The worker's stream following its attempts (absent: the attempt watches alone). */
  followers?: Followers | undefined;
}

type Outcome = { ok: CallToolResult } | { err: unknown } | { abandoned: true };

export async function runAttempt(p: AttemptParams): Promise<void> {
  const { log, tool, claim } = p;
  const leaseMs = claim.leaseDuration ? durationToMs(claim.leaseDuration) : 15_000;
  const control = new Control(p.parkAfterMs);
  const reporter = new Reporter(p.rpc, p.tenantId, p.taskId, claim.leaseToken, p.traceparent, log);
  const guards = new AbortController();
  const offAbandon = onAbort(p.abandon, () => control.stop('shutdown'));
  void followToTheEnd(p.rpc, p.followers, reporter, control, guards.signal);
  if (p.sessionOver) {
    // The session keeps the lease: nothing to renew per attempt.
    const offOver = onAbort(p.sessionOver, () => control.stop('lease_lost'));
    guards.signal.addEventListener('abort', offOver, { once: true });
  } else {
    void keepLease(p.rpc, reporter, leaseMs, control, guards.signal, log);
  }

  const ctx: ToolContext = {
    signal: control.signal,
    taskId: p.taskId,
    tenantId: p.tenantId,
    attempt: claim.attempt,
    maxAttempts: claim.maxAttempts,
    traceparent: p.traceparent,
    progress: async (message) => {
      if (control.stopped) return;
      // A refusal saying the attempt is over stops it here, as the follow would.
      const over = await reporter.status('working', message);
      if (over !== undefined) control.stop(over);
    },
    ask: (key, request) => reporter.ask(control, key, request),
    elicit: async (key, message, requestedSchema) => {
      const request: InputRequestBody = { method: 'elicitation/create', params: { message, requestedSchema } };
      const answer = await reporter.ask(control, key, request);
      if (answer['action'] !== 'accept') throw new AskError('declined', `the question was declined (${String(answer['action'] ?? 'no action')})`, answer);
      return (answer['content'] as Record<string, unknown> | undefined) ?? {};
    },
  };

  log.info('attempt started', { task_id: p.taskId, tool: tool.name, attempt: claim.attempt, ...(p.traceparent && { trace_id: p.traceparent.split('-')[1] }) });
  const started = Date.now();
  const outcome = await runTool(tool, claim.requestJson, ctx, control, p.stopGraceMs);
  guards.abort();
  offAbandon();
  const ended = (what: string) => p.metrics.attempt(tool.name, what, (Date.now() - started) / 1000);

  const stopped = control.stopped;
  if (stopped && stopped !== 'shutdown' && stopped !== 'parked') {
    log.info('attempt stopped; nothing stored', { task_id: p.taskId, reason: (control.signal.reason as Error).message });
    return ended('stopped');
  }
  let reported: Reported;
  let what: string;
  // Whatever a tool returns once told to stop is what it had when it
  // stopped: the task is given back and runs again (it may have finished
  // just then; execution is at least once).
  if (stopped === 'shutdown') {
    reported = await reporter.release('RELEASE_REASON_SHUTDOWN', 'worker shutting down');
    what = 'released';
  } else if (stopped === 'parked') {
    reported = await reporter.release('RELEASE_REASON_PARKED', 'waiting for an answer');
    what = 'parked';
  } else if ('ok' in outcome) {
    const failed = outcome.ok.isError === true;
    reported = await reporter.result(outcome.ok, failed, failed ? firstText(outcome.ok) : undefined);
    what = failed ? 'failed' : 'completed';
  } else {
    const err = 'err' in outcome ? outcome.err : undefined;
    if (err instanceof RetryableError) {
      reported = await reporter.release('RELEASE_REASON_RETRYABLE_ERROR', err.message);
      what = 'released';
    } else if (err instanceof BackOff) {
      reported = await reporter.release('RELEASE_REASON_BACK_OFF', err.message, err.until);
      what = 'backed off';
    } else {
      const message = err instanceof Error ? err.message : String(err);
      reported = await reporter.result(errorResult(message), true, message);
      what = 'failed';
    }
  }
  if (reported.kind === 'stored') {
    log.info('attempt reported', { task_id: p.taskId, outcome: what });
    ended(what);
  } else if (reported.kind === 'refused') {
    log.warn('report refused; the task moved on without this attempt', { task_id: p.taskId, reason: reported.reason });
    ended('stopped');
  } else {
    log.error('could not report; the lease will expire and the task run again', { task_id: p.taskId, error: reported.error });
    ended('unreported');
  }
}

/** Runs the tool; once the attempt is stopped, waits at most `stopGraceMs` more for it. */
async function runTool(tool: WorkerTool, requestJson: string, ctx: ToolContext, control: Control, stopGraceMs: number): Promise<Outcome> {
  const running: Promise<Outcome> = (async () => {
    try {
      const args = await validateArgs(tool, argumentsOf(requestJson));
      return { ok: toResult(await tool.handler(args, ctx)) };
    } catch (err) {
      return { err };
    }
  })();
  const hardStop = new Promise<Outcome>((resolve) => {
    const onStop = () => {
      const timer = setTimeout(() => resolve({ abandoned: true }), stopGraceMs);
      void running.then(() => clearTimeout(timer));
    };
    if (control.signal.aborted) onStop();
    else control.signal.addEventListener('abort', onStop, { once: true });
  });
  return Promise.race([running, hardStop]);
}

/** `params.arguments` of a `tools/call` request; `{}` when absent. */
function argumentsOf(requestJson: string): unknown {
  try {
    const request = JSON.parse(requestJson) as { params?: { arguments?: unknown } };
    return request?.params?.arguments ?? {};
  } catch {
    return {};
  }
}

/**
 * Follows the task on the worker's WatchAttempts stream (until the attempt
 * ends), or with a WatchTask of its own when the service has no such stream.
 */
async function followToTheEnd(rpc: WorkerRpc, followers: Followers | undefined, reporter: Reporter, control: Control, done: AbortSignal): Promise<void> {
  await sleep(WATCH_AFTER_MS, done);
  if (done.aborted) return;
  const unsupported = followers?.unsupported.signal;
  if (followers && unsupported && !unsupported.aborted) {
    const unfollow = followers.follow(reporter.tenantId, reporter.taskId, reporter.leaseToken, control);
    await new Promise<void>((resolve) => {
      let offUnsupported = () => {};
      const end = () => {
        done.removeEventListener('abort', end);
        offUnsupported();
        resolve();
      };
      done.addEventListener('abort', end, { once: true });
      // Shared by every attempt: one listener for them all.
      offUnsupported = onAbort(unsupported, end);
    });
    unfollow();
    if (done.aborted) return;
  }
  await watchForEnd(rpc, reporter, control, done);
}

/**
 * Follows the task over WatchTask: a cancellation (or any terminal status
 * reached elsewhere) stops the tool within moments; any other change is
 * news for a tool waiting for an answer.
 */
async function watchForEnd(rpc: WorkerRpc, reporter: Reporter, control: Control, done: AbortSignal): Promise<void> {
  while (!done.aborted) {
    try {
      for await (const task of rpc.watch(reporter.taskId, reporter.leaseToken, reporter.scope, done)) {
        if (task.status === 'TASK_STATUS_CANCELLED') return control.stop('cancelled');
        if (task.status === 'TASK_STATUS_COMPLETED' || task.status === 'TASK_STATUS_FAILED') return control.stop('finished');
        control.changed();
      }
    } catch (err) {
      if (done.aborted) return;
      if (err instanceof TaskStoreError && err.code === Status.NOT_FOUND) return control.stop('gone');
    }
    // The service may be restarting; lease renewal covers the gap.
    await sleep(500, done);
  }
}

/**
 * Renews the lease every third of its duration. When the service says stop,
 * or no renewal succeeded for a whole lease (so it may be gone), the tool
 * is stopped.
 */
async function keepLease(rpc: WorkerRpc, reporter: Reporter, leaseMs: number, control: Control, done: AbortSignal, log: Logger): Promise<void> {
  const every = Math.max(100, Math.floor(leaseMs / 3));
  let lastRenewed = Date.now();
  for (;;) {
    await sleep(every, done);
    if (done.aborted) return;
    try {
      const res = await rpc.renew(reporter.taskId, reporter.leaseToken, reporter.scope);
      if (!res.keepRunning) {
        const reason = stopReasonFromWire(res.stopReason);
        log.info('told to stop', { task_id: reporter.taskId, reason: res.reason || reason });
        return control.stop(reason, res.reason || undefined);
      }
      lastRenewed = Date.now();
    } catch (err) {
      if (done.aborted) return;
      log.warn('lease renewal failed', { task_id: reporter.taskId, error: (err as Error).message });
      if (Date.now() - lastRenewed >= leaseMs) return control.stop('lease_lost');
    }
  }
}
