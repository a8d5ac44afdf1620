// The worker runtime (worker/src/runtime.rs, claimant.rs): report to the
// service, learn the broker topology from its answer, take jobs for the
// tools this worker serves with a prefetch of its free slots, claim each
// before running it, and on stop take no more jobs, let running attempts
// finish within the shutdown grace, then give the rest back.
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { status as Status } from '@grpc/grpc-js';
import type { TlsOptions } from '../channel.js';
import { TaskStoreError } from '../errors.js';
import { runAttempt } from './attempt.js';
import { JobFeed, sameTopology, topologyFor, type Delivery, type Topology } from './broker.js';
import { settledWithin, sleep } from './control.js';
import { Followers } from './follow.js';
import { Heartbeat } from './heartbeat.js';
import { FIRST_OPEN_WAIT_MS, WorkerSession } from './session.js';
import { createLogger, type Logger } from './log.js';
import { WorkerMetrics } from './metrics.js';
import { WorkerRpc } from './rpc.js';
import { describeTool, type WorkerTool } from './tool.js';

export interface WorkerOptions {
  /** The taskstore service: http://HOST:PORT, or https://HOST:PORT for TLS. Default http://127.0.0.1:50051. */
  endpoint?: string;
  /** The API key (a worker key), sent as `authorization: Bearer`. */
  token?: string;
  /** The CA to trust and, for `--auth mtls`, the worker's certificate, for an https endpoint. */
  tls?: TlsOptions;
  /** RabbitMQ: amqp:// or amqps://. Default amqp://guest:guest@127.0.0.1:5672/%2f. */
  amqpUrl?: string;
  /** The CA to trust and a client certificate for an amqps:// broker. */
  amqpTls?: TlsOptions;
  /**
   * The broker names to use when the service announces none (an older
   * service): `<prefix>.jobs` and `<prefix>.tool.<tool>` (default
   * `taskstore`, `quorum`). The topology the service announces always wins.
   */
  queuePrefix?: string;
  queueType?: 'quorum' | 'classic';
  /** Attempts run at once (default 4). */
  concurrency?: number;
  /** This worker's name in status messages and logs (default host/pid). */
  workerId?: string;
  /** On stop, how long running attempts may take to finish before they are given back (ms, default 30 s). */
  shutdownGraceMs?: number;
  /** How long a question may wait for its answer while the tool holds a slot (ms, default 60 s). */
  parkAfterMs?: number;
  /** How long a tool may take to return after its signal fired before the attempt ends without it (ms, default 5 s). */
  stopGraceMs?: number;
  logger?: Logger;
  metrics?: WorkerMetrics;
}

/** A delivery that waits this long for a free slot goes back to the queue for another worker. */
const MAX_SLOT_WAIT_MS = 1000;
const MAX_RECONNECT_DELAY_MS = 10_000;

interface Job {
  tenant_id: string;
  task_id: string;
  generation: number;
  tool: string;
}

function parseJob(body: Buffer): Job | undefined {
  try {
    const j = JSON.parse(body.toString('utf8')) as Partial<Job>;
    if (typeof j.tenant_id !== 'string' || typeof j.task_id !== 'string' || typeof j.tool !== 'string') return undefined;
    if (typeof j.generation !== 'number' || !Number.isSafeInteger(j.generation) || j.generation < 0) return undefined;
    return j as Job;
  } catch {
    return undefined;
  }
}

/** A child of the job's trace context: same trace, a span id of this attempt's own. */
export function childTraceparent(parent: string | undefined): string | undefined {
  const m = parent ? /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})/.exec(parent.trim()) : null;
  if (!m || /^0+$/.test(m[2]!)) return undefined;
  return `00-${m[2]}-${randomBytes(8).toString('hex')}-${m[4]}`;
}

export class Worker {
  readonly tools: ReadonlyMap<string, WorkerTool>;
  readonly workerId: string;
  readonly metrics: WorkerMetrics;
  /** Settles when the worker has stopped (rejects when it could not run: refused credentials). */
  readonly done: Promise<void>;
  private readonly log: Logger;
  private readonly o: Required<Omit<WorkerOptions, 'token' | 'tls' | 'amqpTls' | 'logger' | 'metrics' | 'workerId' | 'queuePrefix'>> & WorkerOptions;
  private readonly rpc: WorkerRpc;
  private readonly heartbeat: Heartbeat;
  /** The session its claims are made in, and the stream following its attempts. */
  private readonly session: WorkerSession;
  private readonly followers: Followers;
  /** Aborted once the last attempt ended: the session and the stream end. */
  private readonly housekeeping = new AbortController();
  private readonly stopping = new AbortController();
  private readonly abandon = new AbortController();
  private readonly running = new Set<Promise<void>>();
  private readonly pending: Array<{ delivery: Delivery; timer: NodeJS.Timeout }> = [];
  private feed: JobFeed | undefined;
  private topology: Topology;
  private free: number;
  private ready!: { resolve: () => void; reject: (err: unknown) => void; promise: Promise<void> };

  constructor(tools: WorkerTool[], options: WorkerOptions = {}) {
    if (tools.length === 0) throw new Error('no tools to serve');
    const byName = new Map<string, WorkerTool>();
    for (const tool of tools) {
      if (byName.has(tool.name)) throw new Error(`tool ${JSON.stringify(tool.name)} is declared twice`);
      byName.set(tool.name, tool);
    }
    this.tools = byName;
    this.o = {
      endpoint: 'http://127.0.0.1:50051',
      amqpUrl: 'amqp://guest:guest@127.0.0.1:5672/%2f',
      queueType: 'quorum',
      concurrency: 4,
      shutdownGraceMs: 30_000,
      parkAfterMs: 60_000,
      stopGraceMs: 5_000,
      ...options,
    };
    if (!Number.isInteger(this.o.concurrency) || this.o.concurrency < 1) throw new Error(`concurrency must be a whole number >= 1, got ${this.o.concurrency}`);
    this.workerId = options.workerId ?? `${hostname()}/${process.pid}`;
    this.log = options.logger ?? createLogger();
    this.metrics = options.metrics ?? new WorkerMetrics();
    this.metrics.slots = this.o.concurrency;
    this.free = this.o.concurrency;
    this.topology = topologyFor(options.queuePrefix ?? 'taskstore', this.o.queueType);
    this.rpc = new WorkerRpc({ endpoint: this.o.endpoint, ...(options.token && { token: options.token }), ...(options.tls && { tls: options.tls }) });
    this.session = new WorkerSession(this.rpc, this.workerId, this.log);
    this.followers = new Followers(this.rpc, this.log);
    this.heartbeat = new Heartbeat(this.rpc, this.o.endpoint, this.workerId, [...byName.keys()], tools.map(describeTool), () => ({ slots: this.o.concurrency, busy: this.o.concurrency - this.free }), this.log, () => this.consuming);
    let resolve!: () => void;
    let reject!: (err: unknown) => void;
    const promise = new Promise<void>((ok, fail) => ((resolve = ok), (reject = fail)));
    promise.catch(() => {});
    this.ready = { resolve, reject, promise };
    this.done = this.run();
    this.done.then(() => this.ready.reject(new Error('the worker stopped before it consumed jobs')), (err) => this.ready.reject(err));
  }

  /** Resolves once the service lists this worker's tools and their jobs reach it. */
  whenReady(): Promise<void> {
    return this.ready.promise;
  }

  /** Whether jobs can reach this worker now (for a readiness probe). */
  get consuming(): boolean {
    return this.feed !== undefined && !this.stopping.signal.aborted;
  }

  /** Attempts running now. */
  get busy(): number {
    return this.o.concurrency - this.free;
  }

  /** Stops gracefully: no new jobs, running attempts finish within the grace, the rest are given back. Resolves when stopped. */
  stop(): Promise<void> {
    this.stopping.abort();
    return this.done.catch(() => {});
  }

  private async run(): Promise<void> {
    const o = this.o;
    this.log.info('worker starting', { worker_id: this.workerId, tools: [...this.tools.keys()], concurrency: o.concurrency, endpoint: o.endpoint });
    try {
      const first = await this.heartbeat.register(this.stopping.signal, false);
      if (this.stopping.signal.aborted) return;
      this.adopt(first?.topology, first !== undefined);
      if (first !== undefined) {
        void this.session.keep(this.housekeeping.signal);
        void this.followers.keep(this.housekeeping.signal);
        // Claims made before the session opens renew their own leases for
        // as long as they run: take jobs once it is open (or stop, told to
        // meanwhile: the loop below then ends at once).
        const opened = await settledWithin(this.session.firstSettled, FIRST_OPEN_WAIT_MS, this.stopping.signal);
        if (!opened && !this.stopping.signal.aborted) this.log.warn('no worker session yet; taking jobs without one until it opens');
      } else {
        // A service without heartbeats has no per-worker calls either.
        this.followers.unsupported.abort();
      }
      let delay = 200;
      let outage = false;
      let registered = first !== undefined;
      while (!this.stopping.signal.aborted) {
        let feed: JobFeed;
        try {
          feed = await JobFeed.open({
            url: o.amqpUrl,
            socket: { ...(o.amqpTls?.ca && { ca: o.amqpTls.ca }), ...(o.amqpTls?.cert && { cert: o.amqpTls.cert }), ...(o.amqpTls?.key && { key: o.amqpTls.key }) },
            topology: this.topology,
            tools: [...this.tools.keys()],
            workerId: this.workerId,
            log: this.log,
            onDelivery: (d) => this.delivered(d),
          });
        } catch (err) {
          if (!outage) this.log.warn('job queue unavailable; reconnecting with backoff until it is back', { error: (err as Error).message });
          else this.log.debug('job queue still unavailable; reconnecting', { error: (err as Error).message, retry_in_ms: delay });
          outage = true;
          await sleep(delay, this.stopping.signal);
          delay = Math.min(delay * 2, MAX_RECONNECT_DELAY_MS);
          continue;
        }
        this.feed = feed;
        await feed.want(this.free - this.pending.length);
        if (outage) {
          this.log.info('job queue back; consuming again');
          if (!registered) void this.heartbeat.send().catch(() => undefined);
        }
        outage = false;
        delay = 200;
        if (registered) {
          // Listed only now: a job for a listed tool finds its queue.
          registered = false;
          const report = await this.heartbeat.send().catch(() => undefined);
          this.heartbeat.keepReporting(report?.intervalMs ?? 10_000, (r) => this.onReport(r.topology));
        }
        this.log.info('consuming jobs from RabbitMQ', { exchange: this.topology.exchange, queues: [...this.tools.keys()].map((t) => this.topology.toolQueuePrefix + t) });
        this.ready.resolve();
        const stop = new Promise<undefined>((resolve) => this.stopping.signal.addEventListener('abort', () => resolve(undefined), { once: true }));
        const lost = await Promise.race([feed.lost, stop]);
        if (this.stopping.signal.aborted) break;
        this.feed = undefined;
        this.requeuePending();
        // The service hears at once that this worker serves nothing now.
        if (!registered) void this.heartbeat.send().catch(() => undefined);
        if (lost) this.log.warn('job queue unavailable; reconnecting with backoff until it is back', { error: lost.message });
        outage = lost !== undefined;
      }
      await this.shutdown();
    } finally {
      this.housekeeping.abort();
      this.heartbeat.stop();
      this.rpc.close();
    }
  }

  /** The topology the service announced (absent: it has no broker, or predates topologies). */
  private adopt(announced: Topology | undefined, answered: boolean): void {
    if (!announced) {
      if (answered) this.log.warn('the service announces no broker topology (its queue is in-process, or it is older); using --queue-prefix', { exchange: this.topology.exchange });
      return;
    }
    if (this.o.queuePrefix !== undefined && !sameTopology(announced, topologyFor(this.o.queuePrefix, this.o.queueType))) {
      this.log.warn("--queue-prefix/--queue-type differ from the service's; using the service's", { exchange: announced.exchange });
    }
    this.topology = announced;
  }

  private onReport(announced: Topology | undefined): void {
    if (!announced || sameTopology(announced, this.topology)) return;
    this.log.warn('the service announced another broker topology; consuming from it', { exchange: announced.exchange });
    this.topology = announced;
    void this.feed?.close(); // the loop reconnects with the new topology
  }

  private async shutdown(): Promise<void> {
    const feed = this.feed;
    await feed?.want(0);
    this.requeuePending();
    const grace = this.o.shutdownGraceMs;
    this.log.info(grace > 0 ? 'worker stopping: no new jobs; waiting for running attempts to finish' : 'worker stopping: no new jobs; giving running tasks back now (they run again later)', {
      running: this.running.size,
      grace_secs: grace / 1000,
    });
    if (this.running.size > 0 && grace > 0) {
      const finished = Promise.all(this.running).then(() => true);
      if (!(await Promise.race([finished, sleep(grace).then(() => false)]))) {
        this.log.warn('shutdown grace period over; giving the remaining tasks back', { running: this.running.size });
      }
    }
    this.abandon.abort();
    while (this.running.size > 0) await Promise.all(this.running);
    await this.heartbeat.goodbye();
    await feed?.close();
    this.feed = undefined;
    this.log.info('worker stopped');
  }

  private requeuePending(): void {
    for (const { delivery, timer } of this.pending.splice(0)) {
      clearTimeout(timer);
      delivery.requeue();
    }
  }

  private delivered(delivery: Delivery): void {
    if (this.stopping.signal.aborted) return delivery.requeue();
    if (this.free > 0) {
      this.free--;
      this.start(delivery);
    } else {
      // A job beyond the free slots (consumers are being cancelled): wait a moment for a slot.
      const entry = {
        delivery,
        timer: setTimeout(() => {
          const i = this.pending.indexOf(entry);
          if (i >= 0) this.pending.splice(i, 1);
          this.metrics.job(delivery.tool, 'requeued');
          delivery.requeue();
        }, MAX_SLOT_WAIT_MS),
      };
      this.pending.push(entry);
    }
    void this.feed?.want(this.free - this.pending.length);
  }

  private start(delivery: Delivery): void {
    this.metrics.busy = this.busy;
    const run = this.claimAndRun(delivery)
      .catch((err: Error) => this.log.error('attempt failed unexpectedly', { error: err.message }))
      .finally(() => {
        this.running.delete(run);
        const next = this.stopping.signal.aborted ? undefined : this.pending.shift();
        if (next) {
          clearTimeout(next.timer);
          this.start(next.delivery);
        } else {
          this.free++;
        }
        this.metrics.busy = this.busy;
        void this.feed?.want(this.stopping.signal.aborted ? 0 : this.free - this.pending.length);
      });
    this.running.add(run);
  }

  private async claimAndRun(delivery: Delivery): Promise<void> {
    const job = parseJob(delivery.body);
    const tool = job && job.tool === delivery.tool ? this.tools.get(job.tool) : undefined;
    if (!job || !tool) {
      this.log.warn('malformed job dropped', { tool: delivery.tool, body: delivery.body.toString('utf8').slice(0, 200) });
      this.metrics.job(delivery.tool, 'malformed');
      return delivery.reject();
    }
    const traceparent = childTraceparent(delivery.traceparent);
    const session = this.session.current;
    let claim;
    try {
      claim = await this.rpc.claim(
        { taskId: job.task_id, generation: job.generation, workerId: this.workerId, tenantId: job.tenant_id, sessionId: session?.id ?? '' },
        { tenant: job.tenant_id, traceparent },
      );
    } catch (err) {
      const code = err instanceof TaskStoreError ? err.code : undefined;
      if (code === Status.FAILED_PRECONDITION || code === Status.NOT_FOUND || code === Status.INVALID_ARGUMENT) {
        this.log.info('stale job dropped', { task_id: job.task_id, reason: (err as Error).message });
        this.metrics.job(tool.name, 'stale');
        return delivery.ack();
      }
      this.log.warn('cannot claim now; job back to the queue', { task_id: job.task_id, error: (err as Error).message });
      this.metrics.job(tool.name, 'requeued');
      await sleep(1000);
      return delivery.requeue();
    }
    // Claimed: the service's lease now owns the task's fate, however long it runs.
    delivery.ack();
    this.metrics.job(tool.name, 'claimed');
    await runAttempt({
      rpc: this.rpc,
      log: this.log,
      metrics: this.metrics,
      tool,
      tenantId: job.tenant_id,
      taskId: job.task_id,
      claim,
      traceparent,
      parkAfterMs: this.o.parkAfterMs,
      stopGraceMs: this.o.stopGraceMs,
      abandon: this.abandon.signal,
      // Claimed in a session already over (not heard yet): the attempt
      // renews its own lease, as without a session.
      sessionOver: claim.inSession ? session?.over.signal : undefined,
      followers: this.followers,
    });
  }
}
