// One WatchAttempts stream for all of the worker's running attempts
// (worker/src/follow.rs): it tells each attempt to stop (cancelled,
// finished elsewhere, gone) within moments, and wakes a tool waiting for an
// answer when its task changes, instead of a WatchTask stream per attempt.
// A broken stream is opened again and follows every running attempt again.
// Against a service without the call, `unsupported` aborts and attempts
// watch their tasks one by one.
import type * as grpc from '@grpc/grpc-js';
import { status as Status } from '@grpc/grpc-js';
import { stopReasonFromWire } from '../protocol.js';
import type { WireAttemptNews, WireFollowedAttempt, WireWatchAttemptsRequest } from '../wire.js';
import { sleep, type Control } from './control.js';
import type { Logger } from './log.js';
import type { WorkerRpc } from './rpc.js';

const REOPEN_AFTER_MS = 500;
const MAX_PER_MESSAGE = 1000;

const keyOf = (tenantId: string, taskId: string) => `${tenantId}\u0000${taskId}`;

export class Followers {
  private readonly attempts = new Map<string, { followed: WireFollowedAttempt; control: Control }>();
  private stream: grpc.ClientDuplexStream<WireWatchAttemptsRequest, WireAttemptNews> | undefined;
  /** Aborts when the service has no WatchAttempts. */
  readonly unsupported = new AbortController();

  constructor(
    private readonly rpc: WorkerRpc,
    private readonly log: Logger,
  ) {}

  /** Follows the attempt until the returned function is called. */
  follow(tenantId: string, taskId: string, leaseToken: string, control: Control): () => void {
    const key = keyOf(tenantId, taskId);
    const followed = { tenantId, taskId, leaseToken };
    this.attempts.set(key, { followed, control });
    this.stream?.write({ follow: [followed], unfollow: [] });
    return () => {
      this.attempts.delete(key);
      this.stream?.write({ follow: [], unfollow: [{ tenantId, taskId, leaseToken: '' }] });
    };
  }

  /** Keeps the stream open until `stop` aborts. */
  async keep(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      const stream = this.rpc.watchAttempts();
      const closeOnStop = () => stream.cancel();
      stop.addEventListener('abort', closeOnStop, { once: true });
      this.stream = stream;
      const everything = [...this.attempts.values()].map((a) => a.followed);
      for (let start = 0; start < everything.length; start += MAX_PER_MESSAGE) {
        stream.write({ follow: everything.slice(start, start + MAX_PER_MESSAGE), unfollow: [] });
      }
      const code = await new Promise<number | undefined>((resolve) => {
        stream.on('data', (news: WireAttemptNews) => this.deliver(news));
        stream.on('error', (err: grpc.ServiceError) => resolve(err.code));
        stream.on('end', () => resolve(undefined));
      });
      stop.removeEventListener('abort', closeOnStop);
      this.stream = undefined;
      if (code === Status.UNIMPLEMENTED) {
        this.log.info('the service has no WatchAttempts; attempts watch their tasks one by one');
        this.unsupported.abort();
        return;
      }
      if (!stop.aborted) this.log.debug('attempt stream broke; reopening', { code });
      await sleep(REOPEN_AFTER_MS, stop);
    }
  }

  private deliver(news: WireAttemptNews): void {
    const attempt = this.attempts.get(keyOf(news.tenantId, news.taskId));
    if (!attempt) return;
    if (news.stop !== undefined && news.stop !== null) attempt.control.stop(stopReasonFromWire(news.stop));
    else attempt.control.changed();
  }
}
