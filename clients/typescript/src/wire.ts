// The messages of mcp.tasks.v1 as grpc-js hands them over with the loader
// options of src/proto.ts (camelCase, enums as names, int64 as number).
// Hand-written because the service is small and this avoids a codegen step;
// test/unit.test.ts checks the field names against the .proto files.

export type WireStatus =
  | 'TASK_STATUS_UNSPECIFIED'
  | 'TASK_STATUS_WORKING'
  | 'TASK_STATUS_INPUT_REQUIRED'
  | 'TASK_STATUS_COMPLETED'
  | 'TASK_STATUS_FAILED'
  | 'TASK_STATUS_CANCELLED';

export interface WireDuration {
  seconds: number;
  nanos: number;
}

export type WireTimestamp = WireDuration;

export interface WireTask {
  taskId: string;
  status: WireStatus;
  statusMessage?: string;
  createdAt: WireTimestamp | null;
  lastUpdatedAt: WireTimestamp | null;
  ttl: WireDuration | null;
  pollInterval: WireDuration | null;
  sessionId?: string;
  tool?: string;
}

export interface WireDispatch {
  tool?: string;
  maxAttempts?: number;
  startAt?: WireTimestamp;
  startAfter?: WireDuration;
  priority?: number;
}

export interface WireCreateTaskRequest {
  taskId?: string;
  sessionId?: string;
  ttl?: WireDuration;
  requestIdJson: string;
  requestJson: string;
  dispatch?: WireDispatch;
  noExpiry?: boolean;
  pollInterval?: WireDuration;
  idempotencyKey?: string;
}

export interface WireTaskRef {
  taskId: string;
  sessionId?: string;
}

export interface WireUpdateTaskStatusRequest extends WireTaskRef {
  status: WireStatus;
  statusMessage?: string;
  leaseToken?: string;
}

export interface WireStoreTaskResultRequest extends WireTaskRef {
  status: WireStatus;
  resultJson: string;
  statusMessage?: string;
  leaseToken?: string;
}

export interface WireGetTaskResultRequest extends WireTaskRef {
  wait?: boolean;
}

export interface WireGetTaskResultResponse {
  status: WireStatus;
  resultJson: string;
  task: WireTask | null;
}

export interface WireListTasksRequest {
  cursor?: string;
  sessionId?: string;
  pageSize?: number;
  statuses?: WireStatus[];
  tool?: string;
}

export interface WireListTasksResponse {
  tasks: WireTask[];
  nextCursor?: string;
}

export interface WireServedTool {
  name: string;
  workers: number;
  slots: number;
  busy: number;
  lastSeenAt: WireTimestamp | null;
  description: WireToolDescription | null;
}

export interface WireListToolsResponse {
  tools: WireServedTool[];
}

export interface WireCleanupExpiredResponse {
  deleted: number;
}

export interface WireInputRequest {
  key: string;
  requestJson: string;
  askedAt: WireTimestamp | null;
  answerJson?: string;
  answeredAt: WireTimestamp | null;
}

export interface WireListInputRequestsResponse {
  inputRequests: WireInputRequest[];
}

export interface WireAnswerInputRequestsRequest extends WireTaskRef {
  answersJson: Record<string, string>;
}

export interface WireAnswerInputRequestsResponse {
  task: WireTask | null;
  taken: string[];
  ignored: string[];
}

// --- HoldTask (TaskStore) and the worker API (TaskExecution) ---

export type WireStopReason =
  | 'STOP_REASON_UNSPECIFIED'
  | 'STOP_REASON_CANCELLED'
  | 'STOP_REASON_FINISHED'
  | 'STOP_REASON_GONE'
  | 'STOP_REASON_LEASE_LOST';

export type WireReleaseReason =
  | 'RELEASE_REASON_RETRYABLE_ERROR'
  | 'RELEASE_REASON_SHUTDOWN'
  | 'RELEASE_REASON_PARKED'
  | 'RELEASE_REASON_BACK_OFF';

export type WireTaskSupport = 'TASK_SUPPORT_OPTIONAL' | 'TASK_SUPPORT_REQUIRED' | 'TASK_SUPPORT_FORBIDDEN';

export interface WireHoldTaskRequest extends WireTaskRef {
  holder: string;
  leaseToken: string;
}

export interface WireHoldTaskResponse {
  leaseToken: string;
  leaseDuration: WireDuration | null;
  keepRunning: boolean;
  reason: string;
  stopReason: WireStopReason;
}

export interface WireClaimTaskRequest {
  taskId: string;
  generation: number;
  workerId: string;
  tenantId: string;
  /** The worker session that keeps the attempt alive ('' or absent: none). */
  sessionId?: string;
}

export interface WireRenewSessionRequest {
  sessionId: string;
  workerId: string;
  open: boolean;
}

export interface WireRenewSessionResponse {
  keepRunning: boolean;
  leaseDuration?: WireDuration | null;
}

export interface WireFollowedAttempt {
  tenantId: string;
  taskId: string;
  leaseToken: string;
}

export interface WireWatchAttemptsRequest {
  follow: WireFollowedAttempt[];
  unfollow: WireFollowedAttempt[];
}

export interface WireAttemptNews {
  tenantId: string;
  taskId: string;
  /** Absent: the task changed and the attempt goes on. */
  stop?: WireStopReason;
}

export interface WireClaimTaskResponse {
  leaseToken: string;
  leaseDuration: WireDuration | null;
  attempt: number;
  maxAttempts: number;
  tool: string;
  requestJson: string;
  /** False: claimed without a live session; the attempt renews its own lease. */
  inSession: boolean;
}

export interface WireRenewLeaseResponse {
  keepRunning: boolean;
  reason: string;
  stopReason: WireStopReason;
}

export interface WireReleaseTaskRequest {
  taskId: string;
  leaseToken: string;
  reason: WireReleaseReason;
  message: string;
  tenantId: string;
  /** With `RELEASE_REASON_BACK_OFF`: when the key may start again. */
  backOffUntil?: WireTimestamp;
}

export interface WireReleaseTaskResponse {
  willRetry: boolean;
  retryIn: WireDuration | null;
  parked: boolean;
}

export interface WireAskQuestionRequest {
  taskId: string;
  leaseToken: string;
  tenantId: string;
  key: string;
  requestJson: string;
}

export interface WireAskQuestionResponse {
  answerJson?: string;
}

export interface WireToolDescription {
  name: string;
  title: string;
  description: string;
  inputSchemaJson: string;
  taskSupport: WireTaskSupport;
  retry?: WireRetryPolicy | null;
  concurrency?: WireConcurrencyLimit | null;
  rate?: WireRateLimit | null;
  fairnessKey?: string;
}

export interface WireConcurrencyLimit {
  max: number;
  key: string;
}

export interface WireRateLimit {
  starts: number;
  per: WireDuration;
  key: string;
}

export interface WireRetryPolicy {
  maxAttempts?: number;
  backoffBase?: WireDuration;
  backoffMax?: WireDuration;
  retryErrors?: boolean;
  retryLostWorkers?: boolean;
}

export interface WireHeartbeatRequest {
  workerId: string;
  tools: string[];
  slots: number;
  busy: number;
  stopping: boolean;
  descriptions: WireToolDescription[];
  /** Whether it consumes its tools' queues now (unset: older workers, counted as consuming). */
  consuming?: boolean;
}

/** One queue argument: exactly one of `text` (AMQP long string) and `integer` (AMQP long int) is set. */
export interface WireQueueArgument {
  name: string;
  text?: string;
  integer?: number;
}

export interface WireQueueTopology {
  exchange: string;
  toolQueuePrefix: string;
  queueArguments: WireQueueArgument[];
}

export interface WireHeartbeatResponse {
  interval: WireDuration | null;
  topology: WireQueueTopology | null;
}
