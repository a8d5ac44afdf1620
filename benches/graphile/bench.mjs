// The graphile-worker baseline for benches/run.sh's e2e figure: the same
// kind of load (clients that each create a job and wait until a worker has
// run it) on the same PostgreSQL, with graphile-worker's own queue (no
// broker) and no stored result: the worker's only write after the job is a
// NOTIFY that tells the waiting client, as our service tells its caller.
//
//   node bench.mjs migrate URL
//   node bench.mjs worker URL CONCURRENCY
//   node bench.mjs load URL CLIENTS SECONDS [RATE]
//
// `load` prints one JSON line: count, per_second, p50_ms, p99_ms of
// create→done.
import pg from "pg";
import { Logger, run, runMigrations } from "graphile-worker";

const CHANNEL = "taskstore_bench_done";
const [mode, url, ...rest] = process.argv.slice(2);

if (mode === "migrate") {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query("DROP SCHEMA IF EXISTS graphile_worker CASCADE");
  await client.end();
  await runMigrations({ connectionString: url, logger: silentLogger() });
} else if (mode === "worker") {
  const concurrency = Number(rest[0] ?? 32);
  // graphile-worker's advice for throughput: a local queue of about
  // concurrentJobs + 1 jobs, fetched (and locked) in one query, so that each
  // job does not cost a query of its own to find. GRAPHILE_LOCAL_QUEUE sets
  // another size; 0 turns it off (the baseline before issue 40).
  const localQueue = Number(process.env.GRAPHILE_LOCAL_QUEUE ?? concurrency + 1);
  const runner = await run({
    preset: localQueue > 1 ? { worker: { localQueue: { size: localQueue } } } : undefined,
    connectionString: url,
    concurrency,
    // Half the concurrency: PostgreSQL's 100 connections must also hold the
    // load generator's and the other worker's (graphile-worker's default is 10).
    maxPoolSize: Math.max(10, Math.ceil(concurrency / 2)),
    pollInterval: 1000,
    noHandleSignals: false,
    logger: silentLogger(),
    taskList: {
      noop: async (payload, helpers) => {
        await helpers.query("SELECT pg_notify($1, $2)", [CHANNEL, String(payload.id)]);
      },
    },
  });
  await runner.promise;
} else if (mode === "load") {
  const clients = Number(rest[0] ?? 64);
  const seconds = Number(rest[1] ?? 10);
  const rate = rest[2] ? Number(rest[2]) : null;
  console.log(JSON.stringify(await load(url, clients, seconds, rate)));
} else {
  console.error("usage: bench.mjs migrate|worker|load URL ...");
  process.exit(2);
}

function silentLogger() {
  // Errors only: the bench prints its figures and nothing else.
  return new Logger(() => (level, message) => {
    if (level === "error") console.error(message);
  });
}

async function load(url, clients, seconds, rate) {
  const waiting = new Map();
  const listener = new pg.Client({ connectionString: url });
  await listener.connect();
  listener.on("notification", (note) => {
    const done = waiting.get(note.payload);
    if (done) {
      waiting.delete(note.payload);
      done();
    }
  });
  await listener.query(`LISTEN ${CHANNEL}`);
  // As many connections as our service's pool in run.sh at most (20): the
  // clients share them, as our clients share the service's.
  const pool = new pg.Pool({ connectionString: url, max: Math.min(clients, 20) });
  const latencies = [];
  let next = 0;
  const started = performance.now();
  const deadline = started + seconds * 1000;
  // With a rate, jobs start on a fixed schedule shared by the clients.
  const interval = rate ? 1000 / rate : 0;
  let scheduled = started;
  async function client() {
    while (performance.now() < deadline) {
      if (rate) {
        const at = scheduled;
        scheduled += interval;
        const wait = at - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        if (performance.now() >= deadline) return;
      }
      const id = String(next++);
      const begin = performance.now();
      const done = new Promise((resolve) => waiting.set(id, resolve));
      await pool.query("SELECT graphile_worker.add_job('noop', json_build_object('id', $1::text))", [id]);
      await done;
      latencies.push(performance.now() - begin);
    }
  }
  await Promise.all(Array.from({ length: clients }, client));
  const elapsed = (performance.now() - started) / 1000;
  await pool.end();
  await listener.end();
  latencies.sort((a, b) => a - b);
  const rank = (q) => latencies[Math.min(latencies.length - 1, Math.ceil(q * latencies.length) - 1)] ?? 0;
  return {
    count: latencies.length,
    per_second: latencies.length / elapsed,
    p50_ms: rank(0.5),
    p99_ms: rank(0.99),
  };
}
