// The worker's session (TaskExecution.RenewSession; worker/src/session.rs):
// one renewal every third of the lease keeps every attempt claimed in it
// alive, however many run, in place of a RenewLease per attempt. When the
// service says the session is over (the worker was frozen or cut off past
// its lease), or no renewal succeeded for a whole lease, every attempt
// claimed in it stops and stores nothing, and a new session opens under a
// new id. The worker opens its first session before it takes jobs
// (waiting at most FIRST_OPEN_WAIT_MS), so that its first claims are in it
// too: an attempt claimed without one renews its own lease for as long as
// it runs. Until one is open (and against a service without sessions)
// claims carry none and their attempts renew their own leases.
import { randomBytes } from 'node:crypto';
import { status as Status } from '@grpc/grpc-js';
import { durationToMs } from '../convert.js';
import { TaskStoreError } from '../errors.js';
import { sleep } from './control.js';
import type { Logger } from './log.js';
import type { WorkerRpc } from './rpc.js';

const FIRST_RETRY_MS = 200;
const MAX_RETRY_MS = 5_000;
const DEFAULT_LEASE_MS = 15_000;
/** The longest the worker waits for its first session before taking jobs. */
export const FIRST_OPEN_WAIT_MS = 5_000;

export interface OpenSession {
  /** A secret like a lease token: never logged. */
  id: string;
  /** Aborted when the session is over: its attempts must stop. */
  over: AbortController;
}

export class WorkerSession {
  current: OpenSession | undefined;
  private settle: () => void = () => {};
  /** Resolves once the first session opened, or it is known none will. */
  readonly firstSettled = new Promise<void>((resolve) => {
    this.settle = resolve;
  });

  constructor(
    private readonly rpc: WorkerRpc,
    private readonly workerId: string,
    private readonly log: Logger,
  ) {}

  /** Opens sessions and renews them until `stop` aborts (after the last attempt ended). */
  async keep(stop: AbortSignal): Promise<void> {
    try {
      await this.keepOpening(stop);
    } finally {
      this.settle();
    }
  }

  private async keepOpening(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      const id = randomBytes(16).toString('hex');
      const leaseMs = await this.open(id, stop);
      if (leaseMs === undefined) return;
      const session: OpenSession = { id, over: new AbortController() };
      this.current = session;
      this.settle();
      this.log.debug('worker session open');
      const over = await this.renewUntilOver(id, leaseMs, stop);
      this.current = undefined;
      if (over) {
        this.log.warn('worker session over; stopping its attempts (they run again elsewhere)');
        session.over.abort();
      }
    }
  }

  private async open(id: string, stop: AbortSignal): Promise<number | undefined> {
    let delay = FIRST_RETRY_MS;
    while (!stop.aborted) {
      try {
        const leaseMs = await this.renew(id, true);
        if (leaseMs !== undefined) return leaseMs;
        this.log.warn('new worker session refused; retrying');
      } catch (err) {
        if (err instanceof TaskStoreError && err.code === Status.UNIMPLEMENTED) {
          this.log.info('the service keeps no worker sessions; attempts renew their own leases');
          return undefined;
        }
        this.log.debug('cannot open a worker session yet; retrying', { error: (err as Error).message });
      }
      await sleep(delay, stop);
      delay = Math.min(delay * 2, MAX_RETRY_MS);
    }
    return undefined;
  }

  /** True when the session is over; false when `stop` aborted. */
  private async renewUntilOver(id: string, leaseMs: number, stop: AbortSignal): Promise<boolean> {
    let lastRenewed = Date.now();
    for (;;) {
      await sleep(Math.max(100, Math.floor(leaseMs / 3)), stop);
      if (stop.aborted) return false;
      try {
        const renewed = await this.renew(id, false);
        if (renewed === undefined) return true;
        leaseMs = renewed;
        lastRenewed = Date.now();
      } catch (err) {
        this.log.warn('worker session renewal failed', { error: (err as Error).message });
        if (Date.now() - lastRenewed >= leaseMs) return true;
      }
    }
  }

  /** One RenewSession call: the lease duration, or undefined when the session is over. */
  private async renew(id: string, open: boolean): Promise<number | undefined> {
    const res = await this.rpc.renewSession({ sessionId: id, workerId: this.workerId, open });
    if (!res.keepRunning) return undefined;
    return res.leaseDuration ? durationToMs(res.leaseDuration) || DEFAULT_LEASE_MS : DEFAULT_LEASE_MS;
  }
}
