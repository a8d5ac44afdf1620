// One error type for every failed call, carrying the gRPC status so callers
// can branch on it (isNotFound, isFailedPrecondition) without importing
// grpc-js themselves.
import { status as Status, type ServiceError } from '@grpc/grpc-js';

export class TaskStoreError extends Error {
  /** The gRPC status code (grpc-js `status` enum). */
  readonly code: Status;
  /** The name of the code, e.g. `NOT_FOUND`. */
  readonly codeName: string;

  constructor(code: Status, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TaskStoreError';
    this.code = code;
    this.codeName = Status[code] ?? `CODE_${code}`;
  }
}

/** Wraps a grpc-js error; `what` names the operation for the message. */
export function fromServiceError(err: unknown, what: string): TaskStoreError {
  if (err instanceof TaskStoreError) return err;
  const se = err as Partial<ServiceError>;
  if (typeof se?.code === 'number') {
    const details = se.details || (se.message ?? "").replace(/^\d+ [A-Z_]+: ?/, "") || "(no details)";
    const name = Status[se.code] ?? `CODE_${se.code}`;
    return new TaskStoreError(se.code, `${what}: ${name}: ${details}`, { cause: err });
  }
  return new TaskStoreError(Status.UNKNOWN, `${what}: ${String((err as Error)?.message ?? err)}`, { cause: err });
}

export function isNotFound(err: unknown): boolean {
  return err instanceof TaskStoreError && err.code === Status.NOT_FOUND;
}

export function isFailedPrecondition(err: unknown): boolean {
  return err instanceof TaskStoreError && err.code === Status.FAILED_PRECONDITION;
}
