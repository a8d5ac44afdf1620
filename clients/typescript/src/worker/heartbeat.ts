// The worker's reports to the service (TaskExecution.Heartbeat;
// worker/src/heartbeat.rs): who it is, what it serves (with each tool's
// description, so MCP clients see the tools in tools/list and `taskstore
// status` lists them), how busy it is. The answer says when to report again
// and where jobs are (QueueTopology). The first report doubles as the check
// that the service is reachable: until it succeeds the worker says why and
// retries; refused credentials are not an outage, so the worker stops.
import { status as Status } from '@grpc/grpc-js';
import { durationToMs } from '../convert.js';
import { TaskStoreError } from '../errors.js';
import type { WireHeartbeatResponse, WireToolDescription } from '../wire.js';
import { topologyFromWire, type Topology } from './broker.js';
import { sleep } from './control.js';
import type { Logger } from './log.js';
import type { WorkerRpc } from './rpc.js';

const DEFAULT_INTERVAL_MS = 10_000;

/** The service refused the worker's credentials or role: retrying cannot help. */
export class WorkerRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WorkerRefused';
  }
}

export interface Report {
  intervalMs: number;
  /** Absent: the service has no broker (its queue is in-process). */
  topology: Topology | undefined;
}

export class Heartbeat {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(
    private readonly rpc: WorkerRpc,
    private readonly endpoint: string,
    private readonly workerId: string,
    private readonly tools: string[],
    private readonly descriptions: WireToolDescription[],
    private readonly slots: () => { slots: number; busy: number },
    private readonly log: Logger,
    /** Whether it consumes its tools' queues now: a worker that cannot reach the broker serves nothing. */
    private readonly consuming: () => boolean = () => true,
  ) {}

  /** One report; `listed` false reports no tools (before the worker consumes, so a listed tool has its queue). */
  async send(options: { stopping?: boolean; listed?: boolean } = {}): Promise<Report> {
    const listed = options.listed ?? true;
    const { slots, busy } = this.slots();
    const res: WireHeartbeatResponse = await this.rpc.heartbeat({
      workerId: this.workerId,
      tools: listed ? this.tools : [],
      slots,
      busy,
      stopping: options.stopping ?? false,
      descriptions: listed ? this.descriptions : [],
      consuming: this.consuming(),
    });
    const intervalMs = res.interval ? durationToMs(res.interval) : 0;
    return { intervalMs: intervalMs > 0 ? intervalMs : DEFAULT_INTERVAL_MS, topology: res.topology ? topologyFromWire(res.topology) : undefined };
  }

  /**
   * Reports until the service answers, saying why each try failed. Resolves
   * with the answer, or undefined for a service without heartbeats or when
   * `signal` aborts first; throws WorkerRefused for refused credentials.
   */
  async register(signal: AbortSignal, listed: boolean): Promise<Report | undefined> {
    let delay = 200;
    while (!signal.aborted) {
      try {
        const report = await this.send({ listed });
        return report;
      } catch (err) {
        const code = err instanceof TaskStoreError ? err.code : undefined;
        const message = (err as Error).message;
        // An HTTP port (the MCP endpoint, say) answers with an HTTP status
        // and no grpc-status: no retry finds a taskstore there.
        if (code === Status.UNIMPLEMENTED && /HTTP status code/i.test(message)) {
          throw new WorkerRefused(
            `${this.endpoint} is not a taskstore service: the address answers, but not as the taskstore gRPC API; point --endpoint at the service's gRPC port (--listen, 50051 by default), not its MCP (50052) or dashboard (50053) port (${message})`,
          );
        }
        if (code === Status.UNIMPLEMENTED) {
          this.log.warn('the service does not take worker heartbeats (an older version); running without them', { endpoint: this.endpoint });
          return undefined;
        }
        if (code === Status.UNAUTHENTICATED) {
          throw new WorkerRefused(
            `the service at ${this.endpoint} refused this worker's credentials (${message}): give a worker key with --token-file or --token (\`taskstore keys create --role worker\`)`,
          );
        }
        if (code === Status.PERMISSION_DENIED) {
          throw new WorkerRefused(
            `the service at ${this.endpoint} does not let these credentials run tasks (${message}): workers need a worker key (\`taskstore keys create --role worker\`)`,
          );
        }
        this.log.warn('cannot reach the taskstore service; is --endpoint right and the service running? retrying', {
          endpoint: this.endpoint,
          error: message,
          retry_in_ms: delay,
        });
      }
      await sleep(delay, signal);
      delay = Math.min(delay * 2, 10_000);
    }
    return undefined;
  }

  /** Reports every interval until `stop()`; `onReport` sees each answer (a topology that changed). */
  keepReporting(intervalMs: number, onReport: (report: Report) => void): void {
    const next = (ms: number) => {
      if (this.stopped) return;
      this.timer = setTimeout(async () => {
        try {
          const report = await this.send();
          onReport(report);
          next(report.intervalMs);
        } catch (err) {
          this.log.warn('heartbeat not delivered; the service may list this worker late', { error: (err as Error).message });
          next(ms);
        }
      }, ms);
    };
    next(intervalMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  /** Says goodbye, so the worker's tools leave ListTools at once. */
  async goodbye(): Promise<void> {
    this.stop();
    try {
      await this.send({ stopping: true });
    } catch (err) {
      this.log.debug('goodbye not delivered; the service forgets this worker when its reports stop', { error: (err as Error).message });
    }
  }
}
