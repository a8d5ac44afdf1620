// Turns the user-facing connection options into a grpc-js address,
// credentials and channel options.
import * as grpc from '@grpc/grpc-js';

export interface TlsOptions {
  /** PEM of the CA to trust instead of the system roots. */
  ca?: string | Buffer;
  /** PEM client certificate (for a service run with `--auth mtls`); with `key`. */
  cert?: string | Buffer;
  /** PEM private key of `cert`. */
  key?: string | Buffer;
}

export interface ConnectionOptions {
  /** `http://HOST:PORT` (plaintext) or `https://HOST:PORT` (TLS); a bare HOST:PORT means http. */
  endpoint: string;
  /** API key, sent as `authorization: Bearer <token>` on every call. */
  token?: string;
  /**
   * The tenant to act in, sent as `x-taskstore-tenant` on every call: needed
   * by credentials that reach every tenant (an operator's admin key); a key
   * of one tenant acts in its own and may only name that one. Unset: the
   * environment variable `TASKSTORE_TENANT`, else none.
   */
  tenant?: string;
  /** TLS material for an https endpoint. */
  tls?: TlsOptions;
  /** Extra grpc-js channel options; they win over the defaults below. */
  channelOptions?: grpc.ChannelOptions;
}

const pem = (v: string | Buffer | undefined): Buffer | null => (v === undefined ? null : Buffer.from(v));

// UNAVAILABLE means the database or the connection is down and the service
// says retrying is safe; only calls that change nothing (or are idempotent,
// like CancelTask) are retried, so a retry can never create a second task.
const RETRY_SERVICE_CONFIG = {
  methodConfig: [
    {
      name: ['GetTask', 'GetTaskResult', 'ListTasks', 'CancelTask', 'ListTools'].map((method) => ({
        service: 'mcp.tasks.v1.TaskStore',
        method,
      })),
      retryPolicy: {
        maxAttempts: 4,
        initialBackoff: '0.2s',
        maxBackoff: '2s',
        backoffMultiplier: 2,
        retryableStatusCodes: ['UNAVAILABLE'],
      },
    },
  ],
};

const DEFAULT_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  // Ping an idle-looking connection so a dead peer (a restarted pod, a
  // dropped NAT entry) is noticed within ~40 s, also during long waits.
  'grpc.keepalive_time_ms': 30_000,
  'grpc.keepalive_timeout_ms': 10_000,
  // No pings without calls: servers commonly punish those (too_many_pings).
  'grpc.keepalive_permit_without_calls': 0,
  'grpc.initial_reconnect_backoff_ms': 250,
  'grpc.max_reconnect_backoff_ms': 5_000,
  // Results are up to 1 MiB by default, a list page holds up to 1000 tasks;
  // the service's own limit is 4 MiB, so accept what it may send.
  'grpc.max_receive_message_length': 8 * 1024 * 1024,
  'grpc.service_config': JSON.stringify(RETRY_SERVICE_CONFIG),
  'grpc.enable_retries': 1,
};

/** The gRPC metadata that names the tenant a call acts in. */
export const TENANT_METADATA = 'x-taskstore-tenant';

// The service's tenant id: 1-128 printable ASCII characters without spaces
// (`*`, every tenant, is for making keys, not a tenant to act in).
const TENANT_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * The tenant `opts` names (or `TASKSTORE_TENANT`, when the option is not
 * given and the variable is not empty), checked; undefined for none.
 */
export function resolveTenant(opts: Pick<ConnectionOptions, 'tenant'>, env: NodeJS.ProcessEnv = process.env): string | undefined {
  let tenant: unknown = opts.tenant;
  let source = 'the tenant option';
  if (tenant === undefined) {
    const fromEnv = env['TASKSTORE_TENANT'];
    if (fromEnv === undefined || fromEnv === '') return undefined;
    tenant = fromEnv;
    source = 'TASKSTORE_TENANT (the default of the tenant option)';
  }
  if (typeof tenant !== 'string' || !TENANT_ID.test(tenant)) {
    throw new Error(`taskstore: ${source} must be 1 to 128 printable ASCII characters without spaces, got ${JSON.stringify(tenant)}`);
  }
  if (tenant === '*') throw new Error(`taskstore: ${source} must name one tenant (* means every tenant), got "*"`);
  return tenant;
}

export interface ResolvedChannel {
  address: string;
  credentials: grpc.ChannelCredentials;
  options: grpc.ChannelOptions;
}

export function resolveChannel(opts: ConnectionOptions): ResolvedChannel {
  const m = /^(?:(https?):\/\/)?([^/]+?)\/?$/.exec(opts.endpoint.trim());
  if (!m) throw new Error(`taskstore endpoint must be http://HOST:PORT or https://HOST:PORT, got ${opts.endpoint}`);
  const scheme = m[1] ?? 'http';
  const hostPort = m[2]!;
  const address = /:\d+$/.test(hostPort) ? hostPort : `${hostPort}:${scheme === 'https' ? 443 : 80}`;

  let credentials: grpc.ChannelCredentials;
  if (scheme === 'https') {
    credentials = grpc.credentials.createSsl(pem(opts.tls?.ca), pem(opts.tls?.key), pem(opts.tls?.cert));
  } else {
    if (opts.tls?.cert || opts.tls?.key || opts.tls?.ca) {
      throw new Error('taskstore: tls options need an https:// endpoint');
    }
    credentials = grpc.credentials.createInsecure();
  }
  return { address, credentials, options: { ...DEFAULT_CHANNEL_OPTIONS, ...opts.channelOptions } };
}
