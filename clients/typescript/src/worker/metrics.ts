// The worker's metrics, with taskworker's names and labels (so one dashboard
// shows workers of every language): `taskworker_slots`,
// `taskworker_slots_busy`, `taskworker_jobs_total{tool,result}`,
// `taskworker_attempts_total{tool,outcome}` and
// `taskworker_attempt_duration_seconds{tool,outcome}`. Served in the
// Prometheus text format by `serveMetrics` (`--metrics-listen`), beside
// GET /livez and GET /readyz (200 while the worker consumes jobs).
import { createServer, type Server } from 'node:http';

const BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];

type Labels = Record<string, string>;
const key = (labels: Labels) => JSON.stringify(Object.entries(labels).sort());
const render = (labels: Labels, extra: Labels = {}) => {
  const all = [...Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : 1)), ...Object.entries(extra)];
  return all.length ? `{${all.map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`).join(',')}}` : '';
};

interface Histogram {
  labels: Labels;
  counts: number[];
  sum: number;
  count: number;
}

export class WorkerMetrics {
  slots = 0;
  busy = 0;
  private readonly jobs = new Map<string, { labels: Labels; value: number }>();
  private readonly attempts = new Map<string, { labels: Labels; value: number }>();
  private readonly durations = new Map<string, Histogram>();

  /** What became of a delivered job: `claimed`, `stale`, `requeued` or `malformed`. */
  job(tool: string, result: 'claimed' | 'stale' | 'requeued' | 'malformed'): void {
    const labels = { tool, result };
    const entry = this.jobs.get(key(labels)) ?? { labels, value: 0 };
    entry.value++;
    this.jobs.set(key(labels), entry);
  }

  /** An attempt ended: `completed`, `failed`, `released`, `parked`, `stopped` or `unreported`, after `seconds`. */
  attempt(tool: string, outcome: string, seconds: number): void {
    const labels = { tool, outcome };
    const k = key(labels);
    const entry = this.attempts.get(k) ?? { labels, value: 0 };
    entry.value++;
    this.attempts.set(k, entry);
    const h = this.durations.get(k) ?? { labels, counts: BUCKETS.map(() => 0), sum: 0, count: 0 };
    BUCKETS.forEach((b, i) => {
      if (seconds <= b) h.counts[i]!++;
    });
    h.sum += seconds;
    h.count++;
    this.durations.set(k, h);
  }

  /** The Prometheus text exposition. */
  render(): string {
    const out: string[] = [];
    out.push('# TYPE taskworker_slots gauge', `taskworker_slots ${this.slots}`);
    out.push('# TYPE taskworker_slots_busy gauge', `taskworker_slots_busy ${this.busy}`);
    out.push('# TYPE taskworker_jobs_total counter');
    for (const { labels, value } of this.jobs.values()) out.push(`taskworker_jobs_total${render(labels)} ${value}`);
    out.push('# TYPE taskworker_attempts_total counter');
    for (const { labels, value } of this.attempts.values()) out.push(`taskworker_attempts_total${render(labels)} ${value}`);
    out.push('# TYPE taskworker_attempt_duration_seconds histogram');
    for (const h of this.durations.values()) {
      BUCKETS.forEach((b, i) => out.push(`taskworker_attempt_duration_seconds_bucket${render(h.labels, { le: String(b) })} ${h.counts[i]}`));
      out.push(`taskworker_attempt_duration_seconds_bucket${render(h.labels, { le: '+Inf' })} ${h.count}`);
      out.push(`taskworker_attempt_duration_seconds_sum${render(h.labels)} ${h.sum}`);
      out.push(`taskworker_attempt_duration_seconds_count${render(h.labels)} ${h.count}`);
    }
    return out.join('\n') + '\n';
  }
}

/** Serves GET /metrics, /livez and /readyz on `listen` (HOST:PORT); resolves with the server once listening. */
export function serveMetrics(listen: string, metrics: WorkerMetrics, ready: () => boolean): Promise<Server> {
  const m = /^(.*):(\d+)$/.exec(listen);
  if (!m) throw new Error(`--metrics-listen must be HOST:PORT, got ${listen}`);
  const host = m[1]!.replace(/^\[(.*)\]$/, '$1');
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET') return void res.writeHead(405).end();
    if (path === '/metrics') return void res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(metrics.render());
    if (path === '/livez') return void res.writeHead(200).end('ok\n');
    if (path === '/readyz') return void (ready() ? res.writeHead(200).end('ready\n') : res.writeHead(503).end('not consuming\n'));
    res.writeHead(404).end();
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(Number(m[2]), host, () => resolve(server));
  });
}
