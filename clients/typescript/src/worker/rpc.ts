// The worker's calls to the service: the execution API (claim, renew,
// release, ask, heartbeat) and the task-store calls an attempt reports with
// (progress, result, watch). Every call carries the worker's credentials;
// an attempt's calls also carry its job's tenant and its trace.
import * as grpc from '@grpc/grpc-js';
import { resolveChannel, TENANT_METADATA, type ConnectionOptions } from '../channel.js';
import { fromServiceError } from '../errors.js';
import { taskExecutionServiceClient, taskStoreServiceClient } from '../proto.js';
import type {
  WireAskQuestionRequest,
  WireAskQuestionResponse,
  WireClaimTaskRequest,
  WireClaimTaskResponse,
  WireHeartbeatRequest,
  WireHeartbeatResponse,
  WireReleaseTaskRequest,
  WireReleaseTaskResponse,
  WireRenewLeaseResponse,
  WireRenewSessionRequest,
  WireRenewSessionResponse,
  WireAttemptNews,
  WireWatchAttemptsRequest,
  WireStoreTaskResultRequest,
  WireTask,
  WireUpdateTaskStatusRequest,
} from '../wire.js';

/** Who a call acts for: the job's tenant, and the attempt's trace. */
export interface CallScope {
  tenant?: string;
  traceparent?: string | undefined;
  timeoutMs?: number;
}

type Unary = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: unknown) => void) => grpc.ClientUnaryCall;
type Duplex = (md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientDuplexStream<WireWatchAttemptsRequest, WireAttemptNews>;
type Streaming = (req: unknown, md: grpc.Metadata, opts: grpc.CallOptions) => grpc.ClientReadableStream<WireTask>;

export class WorkerRpc {
  private readonly execution: grpc.Client;
  private readonly store: grpc.Client;
  private readonly token: string | undefined;

  constructor(options: Omit<ConnectionOptions, 'tenant'>) {
    const { address, credentials, options: channelOptions } = resolveChannel(options);
    this.execution = new (taskExecutionServiceClient())(address, credentials, channelOptions);
    // The same target and options: grpc-js shares the connection.
    this.store = new (taskStoreServiceClient())(address, credentials, channelOptions);
    this.token = options.token;
  }

  close(): void {
    this.execution.close();
    this.store.close();
  }

  claim(req: WireClaimTaskRequest, scope: CallScope): Promise<WireClaimTaskResponse> {
    return this.unary(this.execution, 'claimTask', 'ClaimTask', req, scope);
  }

  renew(taskId: string, leaseToken: string, scope: CallScope & { tenant: string }): Promise<WireRenewLeaseResponse> {
    return this.unary(this.execution, 'renewLease', 'RenewLease', { taskId, leaseToken, tenantId: scope.tenant }, scope);
  }

  renewSession(req: WireRenewSessionRequest): Promise<WireRenewSessionResponse> {
    return this.unary(this.execution, 'renewSession', 'RenewSession', req, {});
  }

  /** WatchAttempts: the worker's one stream following its running attempts. */
  watchAttempts(): grpc.ClientDuplexStream<WireWatchAttemptsRequest, WireAttemptNews> {
    const fn = (this.execution as unknown as Record<string, Duplex>)['watchAttempts']!;
    return fn.call(this.execution, this.metadata({}), {});
  }

  release(req: WireReleaseTaskRequest, scope: CallScope): Promise<WireReleaseTaskResponse> {
    return this.unary(this.execution, 'releaseTask', 'ReleaseTask', req, scope);
  }

  ask(req: WireAskQuestionRequest, scope: CallScope): Promise<WireAskQuestionResponse> {
    return this.unary(this.execution, 'askQuestion', 'AskQuestion', req, scope);
  }

  heartbeat(req: WireHeartbeatRequest): Promise<WireHeartbeatResponse> {
    return this.unary(this.execution, 'heartbeat', 'Heartbeat', req, {});
  }

  updateStatus(req: WireUpdateTaskStatusRequest, scope: CallScope): Promise<WireTask> {
    return this.unary(this.store, 'updateTaskStatus', 'UpdateTaskStatus', req, scope);
  }

  storeResult(req: WireStoreTaskResultRequest, scope: CallScope): Promise<WireTask> {
    return this.unary(this.store, 'storeTaskResult', 'StoreTaskResult', req, scope);
  }

  /**
   * WatchTask: the task now, then after every change until it is terminal. Cancel with `signal`.
   * A worker follows only the task its attempt runs: it passes the attempt's lease.
   */
  async *watch(taskId: string, leaseToken: string, scope: CallScope, signal: AbortSignal): AsyncGenerator<WireTask> {
    const fn = (this.store as unknown as Record<string, Streaming>)['watchTask']!;
    const call = fn.call(this.store, { taskId, leaseToken }, this.metadata(scope), {});
    const cancel = () => call.cancel();
    signal.addEventListener('abort', cancel, { once: true });
    try {
      for await (const task of call as AsyncIterable<WireTask>) yield task;
    } catch (err) {
      throw fromServiceError(err, 'WatchTask');
    } finally {
      signal.removeEventListener('abort', cancel);
      call.cancel();
    }
  }

  private metadata(scope: CallScope): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.token) md.set('authorization', `Bearer ${this.token}`);
    // A worker of a shared fleet acts in the tenant of each job it runs.
    if (scope.tenant) md.set(TENANT_METADATA, scope.tenant);
    if (scope.traceparent) md.set('traceparent', scope.traceparent);
    return md;
  }

  private unary<T>(client: grpc.Client, method: string, rpc: string, req: unknown, scope: CallScope): Promise<T> {
    const fn = (client as unknown as Record<string, Unary>)[method]!;
    const deadline = Date.now() + (scope.timeoutMs ?? 10_000);
    return new Promise<T>((resolve, reject) => {
      fn.call(client, req, this.metadata(scope), { deadline }, (err, res) => {
        if (err) reject(fromServiceError(err, rpc));
        else resolve(res as T);
      });
    });
  }
}
