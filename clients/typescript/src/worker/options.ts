// The worker command's flags: taskworker's names and environment variables
// (`taskworker --help`), so a fleet runs workers of every language the
// same way. Parsed with node:util; each flag falls back to its variable.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { parseLevel, type LogFormat, type LogLevel } from './log.js';
import type { WorkerOptions } from './runtime.js';

const FLAGS = {
  endpoint: ['TASKWORKER_ENDPOINT', 'the taskstore service: http://HOST:PORT, or https://HOST:PORT for TLS', 'http://127.0.0.1:50051'],
  'amqp-url': ['TASKWORKER_AMQP_URL', 'RabbitMQ URL the jobs come from (amqp:// or amqps://)', 'amqp://guest:guest@127.0.0.1:5672/%2f'],
  'amqp-url-file': ['TASKWORKER_AMQP_URL_FILE', 'a file holding the RabbitMQ URL, instead of --amqp-url', undefined],
  'amqp-ca-cert': ['TASKWORKER_AMQP_CA_CERT', 'trust this CA (PEM) for an amqps:// URL', undefined],
  'amqp-client-cert': ['TASKWORKER_AMQP_CLIENT_CERT', 'present this certificate (PEM) to the broker; with --amqp-client-key', undefined],
  'amqp-client-key': ['TASKWORKER_AMQP_CLIENT_KEY', 'the private key of --amqp-client-cert (PEM)', undefined],
  'queue-prefix': ['TASKWORKER_QUEUE_PREFIX', "the broker names' prefix, used when the service announces no topology", 'taskstore'],
  'queue-type': ['TASKWORKER_QUEUE_TYPE', 'quorum or classic, used when the service announces no topology', 'quorum'],
  concurrency: ['TASKWORKER_CONCURRENCY', 'attempts run at once', '4'],
  'worker-id': ['TASKWORKER_ID', "this worker's name in status messages and logs (default: host/pid)", undefined],
  'shutdown-grace': ['TASKWORKER_SHUTDOWN_GRACE', 'on SIGTERM/SIGINT, how long running attempts may take to finish before they are given back', '30s'],
  'park-after': ['TASKWORKER_PARK_AFTER', "how long a tool's question may wait for its answer while the tool holds a slot", '1m'],
  'stop-grace': ['TASKWORKER_STOP_GRACE', "how long a tool may take to return after its signal fired before the attempt ends without it", '5s'],
  token: ['TASKWORKER_TOKEN', 'the API key to present (a worker key); prefer --token-file', undefined],
  'token-file': ['TASKWORKER_TOKEN_FILE', 'a file holding the API key', undefined],
  'ca-cert': ['TASKWORKER_CA_CERT', 'trust this CA (PEM) for an https:// endpoint', undefined],
  'client-cert': ['TASKWORKER_CLIENT_CERT', 'present this certificate (PEM) to a service run with --auth mtls; with --client-key', undefined],
  'client-key': ['TASKWORKER_CLIENT_KEY', 'the private key of --client-cert (PEM)', undefined],
  tools: ['TASKWORKER_TOOLS', "serve only these of the module's tools (comma-separated)", undefined],
  'metrics-listen': ['TASKWORKER_METRICS_LISTEN', 'serve GET /metrics, /livez and /readyz at HOST:PORT', undefined],
  'log-format': ['TASKWORKER_LOG_FORMAT', 'text or json', 'text'],
  'log-level': ['TASKWORKER_LOG', 'error, warn, info or debug', 'info'],
} as const satisfies Record<string, readonly [string, string, string | undefined]>;

type Flag = keyof typeof FLAGS;

export interface CliOptions {
  module: string;
  worker: WorkerOptions;
  tools: string[] | undefined;
  metricsListen: string | undefined;
  logFormat: LogFormat;
  logLevel: LogLevel;
}

export class UsageError extends Error {}

export function usage(): string {
  const lines = Object.entries(FLAGS).map(([flag, [env, help, def]]) => `  --${flag.padEnd(18)} ${help}${def !== undefined ? ` (default ${def})` : ''} [env ${env}]`);
  return [
    'Usage: mcp-taskstore-worker [flags] <module>[#export]',
    '',
    'Runs the tools a module exports (`tools`: defineTool(...)s, or an McpServer; else its default',
    'export or `server`; a function is called first) as a worker of a taskstore fleet.',
    '',
    ...lines,
    '  --help               this text',
  ].join('\n');
}

/** `30s`, `500ms`, `1m`, `1h30m`, `2d`, `0`: in ms. */
export function parseDuration(raw: string): number {
  const text = raw.trim();
  if (text === '0') return 0;
  const units: Record<string, number> = { ns: 1e-6, us: 1e-3, ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000 };
  const re = /(\d+(?:\.\d+)?)\s*([a-z]+)/gy;
  let total = 0;
  let matched = 0;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    const unit = units[m[2]!];
    if (unit === undefined) throw new UsageError(`unknown unit ${m[2]} in duration ${JSON.stringify(raw)}`);
    total += Number(m[1]) * unit;
    matched = re.lastIndex;
  }
  if (matched === 0 || matched !== text.length) throw new UsageError(`invalid duration ${JSON.stringify(raw)}: e.g. 30s, 500ms, 1m, 1h30m`);
  return Math.round(total);
}

const read = (path: string, what: string) => {
  try {
    return readFileSync(path);
  } catch (err) {
    throw new UsageError(`cannot read ${what} ${path}: ${(err as Error).message}`);
  }
};

export function parseCli(argv: string[], env: NodeJS.ProcessEnv = process.env): CliOptions | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { ...Object.fromEntries(Object.keys(FLAGS).map((f) => [f, { type: 'string' as const }])), help: { type: 'boolean' as const } },
  });
  if (values['help']) return 'help';
  const get = (flag: Flag): string | undefined => {
    const v = (values as Record<string, string | undefined>)[flag];
    if (v !== undefined) return v;
    const fromEnv = env[FLAGS[flag][0]];
    return fromEnv !== undefined && fromEnv !== '' ? fromEnv : FLAGS[flag][2];
  };
  if (positionals.length !== 1) throw new UsageError('give exactly one module of tools');
  const pair = (a: Flag, b: Flag) => {
    if ((get(a) === undefined) !== (get(b) === undefined)) throw new UsageError(`--${a} and --${b} go together`);
  };
  pair('client-cert', 'client-key');
  pair('amqp-client-cert', 'amqp-client-key');

  const concurrency = Number(get('concurrency'));
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency must be a whole number >= 1, got ${get('concurrency')}`);
  const queueType = get('queue-type');
  if (queueType !== 'quorum' && queueType !== 'classic') throw new UsageError(`unknown queue type ${JSON.stringify(queueType)}: quorum or classic`);
  const logFormat = get('log-format');
  if (logFormat !== 'text' && logFormat !== 'json') throw new UsageError(`--log-format must be text or json, got ${logFormat}`);

  let token = get('token');
  const tokenFile = get('token-file');
  if (token !== undefined && tokenFile !== undefined) throw new UsageError('give the API key with --token or --token-file (TASKWORKER_TOKEN or TASKWORKER_TOKEN_FILE), not both');
  if (tokenFile !== undefined) token = read(tokenFile, 'the token file').toString('utf8').trim();
  const amqpUrlFile = get('amqp-url-file');
  const amqpUrl = amqpUrlFile !== undefined ? read(amqpUrlFile, 'the AMQP URL file').toString('utf8').replace(/[\r\n]+$/, '') : get('amqp-url')!;
  const pem = (flag: Flag) => {
    const path = get(flag);
    return path === undefined ? undefined : read(path, `--${flag}`);
  };
  const tls = { ca: pem('ca-cert'), cert: pem('client-cert'), key: pem('client-key') };
  const amqpTls = { ca: pem('amqp-ca-cert'), cert: pem('amqp-client-cert'), key: pem('amqp-client-key') };
  const defined = <T extends object>(o: T) => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;

  const explicitPrefix = (values as Record<string, string | undefined>)['queue-prefix'] ?? env['TASKWORKER_QUEUE_PREFIX'];
  const workerId = get('worker-id');
  const worker: WorkerOptions = {
    endpoint: get('endpoint')!,
    amqpUrl,
    queueType,
    concurrency,
    shutdownGraceMs: parseDuration(get('shutdown-grace')!),
    parkAfterMs: parseDuration(get('park-after')!),
    stopGraceMs: parseDuration(get('stop-grace')!),
    ...(explicitPrefix ? { queuePrefix: explicitPrefix } : {}),
    ...(workerId !== undefined && { workerId }),
    ...(token && { token }),
    ...(Object.keys(defined(tls)).length && { tls: defined(tls) }),
    ...(Object.keys(defined(amqpTls)).length && { amqpTls: defined(amqpTls) }),
  };
  const tools = get('tools')
    ?.split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  return { module: positionals[0]!, worker, tools, metricsListen: get('metrics-listen'), logFormat, logLevel: parseLevel(get('log-level')!) };
}
