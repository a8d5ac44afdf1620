// The worker's log: one line per event on stderr, as text or as JSON (the
// shape taskworker's `--log-format json` writes: `timestamp`, `level`,
// `message`, then the event's fields), filtered by level.

export type LogLevel = 'error' | 'warn' | 'info' | 'debug';
export type LogFormat = 'text' | 'json';
export type Fields = Record<string, unknown>;

export interface Logger {
  error(message: string, fields?: Fields): void;
  warn(message: string, fields?: Fields): void;
  info(message: string, fields?: Fields): void;
  debug(message: string, fields?: Fields): void;
}

const RANK: Record<LogLevel, number> = { error: 0, warn: 1, info: 2, debug: 3 };

/** Parses a level (`info`, or a RUST_LOG-like `info,lapin=warn`: the first bare level counts). */
export function parseLevel(raw: string): LogLevel {
  for (const part of raw.split(',')) {
    const level = part.trim().toLowerCase();
    if (level === 'trace') return 'debug';
    if (level in RANK) return level as LogLevel;
  }
  throw new Error(`unknown log level ${JSON.stringify(raw)}: error, warn, info or debug`);
}

export function createLogger(
  options: { format?: LogFormat; level?: LogLevel; write?: (line: string) => void } = {},
): Logger {
  const format = options.format ?? 'text';
  const max = RANK[options.level ?? 'info'];
  const write = options.write ?? ((line: string) => process.stderr.write(line + '\n'));
  const emit = (level: LogLevel) => (message: string, fields: Fields = {}) => {
    if (RANK[level] > max) return;
    const timestamp = new Date().toISOString();
    if (format === 'json') {
      write(JSON.stringify({ timestamp, level: level.toUpperCase(), message, target: 'mcp_taskstore_worker', ...fields }, jsonSafe));
    } else {
      const rest = Object.entries(fields)
        .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v, jsonSafe)}`)
        .join(' ');
      write(`${timestamp} ${level.toUpperCase().padStart(5)} ${message}${rest ? ' ' + rest : ''}`);
    }
  };
  return { error: emit('error'), warn: emit('warn'), info: emit('info'), debug: emit('debug') };
}

function jsonSafe(_key: string, value: unknown): unknown {
  if (value instanceof Error) return value.message;
  if (typeof value === 'bigint') return value.toString();
  return value;
}

/** A logger that says nothing. */
export const silent: Logger = { error() {}, warn() {}, info() {}, debug() {} };
