// Limits a tool declares with its description, which the service's
// dispatcher holds across every worker and replica: at most so many of its
// tasks at once per key (ConcurrencyLimit), at most so many starts per
// window per key (RateLimit).
import { msToDuration } from '../convert.js';
import type { WireConcurrencyLimit, WireRateLimit } from '../wire.js';

/**
 * At most `max` of a tool's tasks run at once per value of `key`, sent to
 * the service with its description; a key's further tasks wait in the
 * service's backlog, spending no attempt. A task keeps the limit and key its
 * tool had when it was created. `{ max: 3, key: 'tenant, arguments.customer_id' }`:
 * at most 3 at once per customer of each tenant.
 */
export interface ConcurrencyLimit {
  /** 1 to 10,000. */
  max: number;
  /**
   * Terms separated by commas, each `tenant`, `tool`, `session` or
   * `arguments.<name>[.<name>...]` (at most 8 terms, 8 names deep, 256
   * characters). Empty or unset: one key for the whole tool, across tenants.
   */
  key?: string;
}

/**
 * At most `starts` of a tool's tasks start within any window of `perMs` per
 * value of `key` (the key as `ConcurrencyLimit`'s), across every worker and
 * replica; the others wait in the service's backlog, spending no attempt.
 * `{ starts: 20, perMs: 1000 }`: at most 20 starts a second for the whole
 * tool. A `BackOff` pauses the same key.
 */
export interface RateLimit {
  /** 1 to 100,000. */
  starts: number;
  /** The window: 10 ms to 24 h. */
  perMs: number;
  /** As `ConcurrencyLimit.key`. */
  key?: string;
}

// The service's rules for a limit (ConcurrencyLimit in
// proto/mcp/tasks/v1/execution.proto): a declaration it would refuse is
// refused here, when the tool is declared, rather than by every heartbeat.
const MAX_CONCURRENCY = 10_000;
const MAX_KEY_CHARS = 256;
const MAX_KEY_TERMS = 8;
const MAX_KEY_DEPTH = 8;
const KEY_NAME = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_RATE_STARTS = 100_000;
const MIN_RATE_WINDOW_MS = 10;
const MAX_RATE_WINDOW_MS = 24 * 3600 * 1000;

/** A declared value, for a message. */
function shown(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value !== 'object' || value === null) return String(value);
  try {
    return JSON.stringify(value);
  } catch {
    return Object.prototype.toString.call(value);
  }
}

/** The limit as declared, checked; a copy, so that changing the object given later changes nothing. */
export function checkConcurrency(tool: string, limit: unknown): ConcurrencyLimit {
  const say = (what: string) => `tool ${tool}: concurrency ${what}`;
  if (typeof limit !== 'object' || limit === null || Array.isArray(limit)) throw new TypeError(say(`must be an object { max, key? }, got ${shown(limit)}`));
  const unknown = Object.keys(limit).filter((k) => k !== 'max' && k !== 'key');
  if (unknown.length > 0) throw new TypeError(say(`has no ${unknown.map((k) => JSON.stringify(k)).join(', ')} (only max and key)`));
  const { max, key } = limit as { max?: unknown; key?: unknown };
  if (typeof max !== 'number' || !Number.isInteger(max)) throw new TypeError(say(`max must be an integer, got ${shown(max)}`));
  if (max < 1 || max > MAX_CONCURRENCY) throw new RangeError(say(`max must be between 1 and ${MAX_CONCURRENCY}, got ${max}`));
  if (key === undefined) return { max };
  if (typeof key !== 'string') throw new TypeError(say(`key must be a string, got ${shown(key)}`));
  checkKey(key, say);
  return { max, key };
}

/** The rate as declared, checked; a copy. */
export function checkRate(tool: string, rate: unknown): RateLimit {
  const say = (what: string) => `tool ${tool}: rate ${what}`;
  if (typeof rate !== 'object' || rate === null || Array.isArray(rate)) throw new TypeError(say(`must be an object { starts, perMs, key? }, got ${shown(rate)}`));
  const unknown = Object.keys(rate).filter((k) => k !== 'starts' && k !== 'perMs' && k !== 'key');
  if (unknown.length > 0) throw new TypeError(say(`has no ${unknown.map((k) => JSON.stringify(k)).join(', ')} (only starts, perMs and key)`));
  const { starts, perMs, key } = rate as { starts?: unknown; perMs?: unknown; key?: unknown };
  if (typeof starts !== 'number' || !Number.isInteger(starts)) throw new TypeError(say(`starts must be an integer, got ${shown(starts)}`));
  if (starts < 1 || starts > MAX_RATE_STARTS) throw new RangeError(say(`starts must be between 1 and ${MAX_RATE_STARTS}, got ${starts}`));
  if (typeof perMs !== 'number' || !Number.isInteger(perMs)) throw new TypeError(say(`perMs must be an integer number of ms, got ${shown(perMs)}`));
  if (perMs < MIN_RATE_WINDOW_MS || perMs > MAX_RATE_WINDOW_MS) throw new RangeError(say(`perMs must be between 10 ms and 24 h, got ${perMs}`));
  if (key === undefined) return { starts, perMs };
  if (typeof key !== 'string') throw new TypeError(say(`key must be a string, got ${shown(key)}`));
  checkKey(key, say);
  return { starts, perMs, key };
}

/**
 * A fairness key as declared, checked: within a tenant, the key whose values
 * take turns when the tool's tasks wait for room (terms as a limit's key).
 */
export function checkFairnessKey(tool: string, key: unknown): string {
  const say = (what: string) => `tool ${tool}: fairness ${what}`;
  if (typeof key !== 'string') throw new TypeError(say(`key must be a string, got ${shown(key)}`));
  checkKey(key, say);
  return key;
}

/** A key as the service takes it: terms of tenant, tool, session, arguments.<path>. */
function checkKey(key: string, say: (what: string) => string): void {
  const chars = [...key].length;
  if (chars > MAX_KEY_CHARS) throw new RangeError(say(`key must be at most ${MAX_KEY_CHARS} characters, got ${chars}`));
  const terms = key.trim() === '' ? [] : key.trim().split(',').map((t) => t.trim());
  if (terms.length > MAX_KEY_TERMS) throw new RangeError(say(`key has more than ${MAX_KEY_TERMS} terms: ${JSON.stringify(key)}`));
  for (const term of terms) {
    if (term === 'tenant' || term === 'tool' || term === 'session') continue;
    const names = term.startsWith('arguments.') ? term.slice('arguments.'.length).split('.') : undefined;
    if (!names || names.length > MAX_KEY_DEPTH || !names.every((n) => KEY_NAME.test(n))) {
      throw new RangeError(say(`key term ${JSON.stringify(term)} is not tenant, tool, session or arguments.<path> (at most ${MAX_KEY_DEPTH} names of A-Z a-z 0-9 _ -)`));
    }
  }
}

export function wireConcurrency(limit: ConcurrencyLimit): WireConcurrencyLimit {
  return { max: limit.max, key: limit.key ?? '' };
}

export function wireRate(rate: RateLimit): WireRateLimit {
  return { starts: rate.starts, per: msToDuration(rate.perMs), key: rate.key ?? '' };
}
