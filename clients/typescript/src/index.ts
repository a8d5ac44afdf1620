export { GrpcTaskStore, toMcpTask, type GrpcTaskStoreOptions } from './task-store.js';
export { moveToolsToFleet, type FleetOptions } from './fleet.js';
export { TaskStatusNotifier, type FollowOptions, type TaskStatusNotifierOptions } from './status-notifier.js';
export {
  TaskStoreClient,
  IDEMPOTENCY_META_KEY,
  START_AFTER_META_KEY,
  START_AT_META_KEY,
  idempotencyKeyOf,
  startOf,
  type AnsweredInputRequests,
  type HoldTaskResult,
  type CallOptions,
  type ClientOptions,
  type CreateTaskParams,
  type ListTasksParams,
  type RequestId,
  type ServedTool,
  type SessionCallOptions,
  type StoreResultParams,
  type TaskResult,
  type UpdateStatusParams,
} from './client.js';
export type { ConnectionOptions, TlsOptions } from './channel.js';
export { isTerminalStatus, type InputRequest, type InputRequestMethod, type StoredTask, type TaskStatus } from './convert.js';
export { TaskStoreError, isFailedPrecondition, isNotFound } from './errors.js';
export { TaskStopped, errorResult, type StopReason } from './protocol.js';
