// Conversions between the wire messages and the MCP-shaped values the public
// API uses: durations in milliseconds, times as ISO strings, statuses as the
// MCP words.
import type { WireDuration, WireInputRequest, WireStatus, WireTask, WireTimestamp } from './wire.js';

/** MCP task statuses (the words of the MCP spec). */
export type TaskStatus = 'working' | 'input_required' | 'completed' | 'failed' | 'cancelled';

const TO_WIRE: Record<TaskStatus, WireStatus> = {
  working: 'TASK_STATUS_WORKING',
  input_required: 'TASK_STATUS_INPUT_REQUIRED',
  completed: 'TASK_STATUS_COMPLETED',
  failed: 'TASK_STATUS_FAILED',
  cancelled: 'TASK_STATUS_CANCELLED',
};

const FROM_WIRE = new Map<string, TaskStatus>(
  Object.entries(TO_WIRE).map(([mcp, wire]) => [wire, mcp as TaskStatus]),
);

export function statusToWire(status: TaskStatus): WireStatus {
  const wire = TO_WIRE[status];
  // Let the server reject nonsense with INVALID_ARGUMENT rather than guess.
  return wire ?? 'TASK_STATUS_UNSPECIFIED';
}

export function statusFromWire(status: WireStatus | string): TaskStatus {
  const mcp = FROM_WIRE.get(status);
  if (!mcp) throw new Error(`taskstore returned an unknown task status ${String(status)}`);
  return mcp;
}

export function isTerminalStatus(status: TaskStatus): boolean {
  return status === 'completed' || status === 'failed' || status === 'cancelled';
}

export function msToDuration(ms: number): WireDuration {
  if (!Number.isFinite(ms) || ms < 0) throw new RangeError(`a duration must be a finite number of ms >= 0, got ${ms}`);
  const whole = Math.floor(ms);
  return { seconds: Math.floor(whole / 1000), nanos: (whole % 1000) * 1_000_000 };
}

export function durationToMs(d: WireDuration): number {
  return Number(d.seconds) * 1000 + Math.round(Number(d.nanos) / 1_000_000);
}

export function timestampToIso(t: WireTimestamp | null | undefined): string {
  // Every task carries both timestamps; the epoch is only a defensive fallback.
  if (!t) return new Date(0).toISOString();
  return new Date(Number(t.seconds) * 1000 + Math.floor(Number(t.nanos) / 1_000_000)).toISOString();
}

/**
 * A task as the service stores it. The MCP task fields keep their MCP names
 * and units (`ttl` and `pollInterval` in ms; `ttl: null` = kept until
 * deleted); `sessionId` and `tool` are extras of this service.
 */
export interface StoredTask {
  taskId: string;
  status: TaskStatus;
  statusMessage?: string;
  createdAt: string;
  lastUpdatedAt: string;
  ttl: number | null;
  pollInterval?: number;
  sessionId?: string;
  tool?: string;
}

export function taskFromWire(t: WireTask): StoredTask {
  const task: StoredTask = {
    taskId: t.taskId,
    status: statusFromWire(t.status),
    createdAt: timestampToIso(t.createdAt),
    lastUpdatedAt: timestampToIso(t.lastUpdatedAt),
    ttl: t.ttl ? durationToMs(t.ttl) : null,
  };
  if (t.pollInterval) task.pollInterval = durationToMs(t.pollInterval);
  if (t.statusMessage !== undefined && t.statusMessage !== null) task.statusMessage = t.statusMessage;
  if (t.sessionId !== undefined && t.sessionId !== null) task.sessionId = t.sessionId;
  if (t.tool !== undefined && t.tool !== null) task.tool = t.tool;
  return task;
}

/** The MCP methods a tool may ask its caller with. */
export type InputRequestMethod = 'elicitation/create' | 'sampling/createMessage' | 'roots/list';

/**
 * A question a task's tool asked (an MCP input request), open or answered.
 * `request` is the MCP request as the tool sent it; `answer` is the
 * caller's result (an `ElicitResult`, `CreateMessageResult` or
 * `ListRootsResult`) as it was given, absent while the question is open.
 */
export interface InputRequest {
  /** The tool's key for the question, unique over the task's life. */
  key: string;
  request: { method: InputRequestMethod; params?: Record<string, unknown> };
  askedAt: string;
  answer?: Record<string, unknown>;
  answeredAt?: string;
}

export function inputRequestFromWire(r: WireInputRequest): InputRequest {
  const out: InputRequest = {
    key: r.key,
    request: JSON.parse(r.requestJson) as InputRequest['request'],
    askedAt: timestampToIso(r.askedAt),
  };
  if (r.answerJson !== undefined && r.answerJson !== null) out.answer = JSON.parse(r.answerJson) as Record<string, unknown>;
  if (r.answeredAt) out.answeredAt = timestampToIso(r.answeredAt);
  return out;
}
