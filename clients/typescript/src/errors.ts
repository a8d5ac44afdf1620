// One error type for every failed call, carrying the gRPC status so callers
// can branch on it (isNotFound, isFailedPrecondition) without importing
// grpc-js themselves.
import { status as Status, type ServiceError } from '@grpc/grpc-js';

export class TaskStoreError extends Error {
  /** The gRPC status code (grpc-js `status` enum). */
  readonly code: Status;
  /** The name of the code, e.g. `NOT_FOUND`. */
  readonly codeName: string;
  /**
   * Why, for programs: the `reason` of the error's `google.rpc.ErrorInfo`
   * detail when the service sent one (e.g. `FENCE_LEASE_LOST`,
   * `QUESTION_KEY_REUSED`, `HOLD_DISPATCHED`).
   */
  readonly reason: string | undefined;
  /** The ErrorInfo's metadata, e.g. `{ status: 'cancelled' }` with `FENCE_TERMINAL`; empty without one. */
  readonly metadata: Readonly<Record<string, string>>;

  constructor(code: Status, message: string, options?: { cause?: unknown; reason?: string; metadata?: Record<string, string> }) {
    super(message, options);
    this.name = 'TaskStoreError';
    this.code = code;
    this.codeName = Status[code] ?? `CODE_${code}`;
    this.reason = options?.reason;
    this.metadata = options?.metadata ?? {};
  }
}

/** Wraps a grpc-js error; `what` names the operation for the message. */
export function fromServiceError(err: unknown, what: string): TaskStoreError {
  if (err instanceof TaskStoreError) return err;
  const se = err as Partial<ServiceError>;
  if (typeof se?.code === 'number') {
    const details = se.details || (se.message ?? "").replace(/^\d+ [A-Z_]+: ?/, "") || "(no details)";
    const name = Status[se.code] ?? `CODE_${se.code}`;
    const info = se.metadata ? errorInfo(se.metadata.get('grpc-status-details-bin')[0]) : undefined;
    return new TaskStoreError(se.code, `${what}: ${name}: ${details}`, { cause: err, ...(info !== undefined && info) });
  }
  return new TaskStoreError(Status.UNKNOWN, `${what}: ${String((err as Error)?.message ?? err)}`, { cause: err });
}

export function isNotFound(err: unknown): boolean {
  return err instanceof TaskStoreError && err.code === Status.NOT_FOUND;
}

export function isFailedPrecondition(err: unknown): boolean {
  return err instanceof TaskStoreError && err.code === Status.FAILED_PRECONDITION;
}

// google.rpc.Status { details = 3: repeated Any { type_url = 1, value = 2 } }
// and google.rpc.ErrorInfo { reason = 1, metadata = 3: map entries
// { key = 1, value = 2 } }, read by hand: two messages do not justify a
// protobuf runtime.
const ERROR_INFO = 'type.googleapis.com/google.rpc.ErrorInfo';

function* fields(buf: Buffer): Generator<[number, number, Buffer | number]> {
  let i = 0;
  const varint = (): number => {
    let n = 0;
    let shift = 0;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated');
      const b = buf[i++]!;
      n += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return n;
      shift += 7;
    }
  };
  while (i < buf.length) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key & 7;
    if (wire === 0) yield [field, wire, varint()];
    else if (wire === 2) {
      const len = varint();
      yield [field, wire, buf.subarray(i, i + len)];
      i += len;
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else return;
  }
}

/** The ErrorInfo reason in a `grpc-status-details-bin` value, if any. */
export function errorInfoReason(details: unknown): string | undefined {
  return errorInfo(details)?.reason;
}

/** The ErrorInfo reason and metadata in a `grpc-status-details-bin` value, if it has one. */
export function errorInfo(details: unknown): { reason: string; metadata: Record<string, string> } | undefined {
  if (!Buffer.isBuffer(details)) return undefined;
  try {
    for (const [field, wire, any] of fields(details)) {
      if (field !== 3 || wire !== 2 || !Buffer.isBuffer(any)) continue;
      let typeUrl = '';
      let value: Buffer | undefined;
      for (const [f, w, v] of fields(any)) {
        if (f === 1 && w === 2 && Buffer.isBuffer(v)) typeUrl = v.toString('utf8');
        if (f === 2 && w === 2 && Buffer.isBuffer(v)) value = v;
      }
      if (typeUrl !== ERROR_INFO || !value) continue;
      let reason: string | undefined;
      const metadata: Record<string, string> = {};
      for (const [f, w, v] of fields(value)) {
        if (w !== 2 || !Buffer.isBuffer(v)) continue;
        if (f === 1) reason = v.toString('utf8');
        if (f === 3) {
          let key = '';
          let entry = '';
          for (const [ef, ew, ev] of fields(v)) {
            if (ef === 1 && ew === 2 && Buffer.isBuffer(ev)) key = ev.toString('utf8');
            if (ef === 2 && ew === 2 && Buffer.isBuffer(ev)) entry = ev.toString('utf8');
          }
          metadata[key] = entry;
        }
      }
      return reason === undefined ? undefined : { reason, metadata };
    }
  } catch {
    // malformed details: no reason
  }
  return undefined;
}
