// The stores the contract suite runs on: the SDK's InMemoryTaskStore as a
// control, and GrpcTaskStore on each backend. Each test gets a fresh
// "subject": for the gRPC store, a fresh session id keeps tests apart inside
// one database (sessions isolate tasks and listings); the in-memory store
// ignores sessions and is simply new.
import { randomUUID } from 'node:crypto';
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { InMemoryTaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import { GrpcTaskStore } from '@mcp-taskstore/client';
import { startService, type Backend, type RunningService } from './service.js';

export interface Subject {
  store: TaskStore;
  /** Pass to every call; undefined for the in-memory store. */
  sessionId: string | undefined;
  dispose(): void;
}

export interface StoreTarget {
  name: string;
  /** The ttl a task created without one gets (ms; null = none). */
  defaultTtl: number | null;
  /** The ttl a task created with `ttl: null` gets. */
  noExpiryTtl: number | null;
  /** Whether sessions isolate tasks. */
  sessions: boolean;
  /** The store lists this many tasks per page. */
  pageSize: number;
  setup(): Promise<void>;
  subject(): Subject;
  teardown(): Promise<void>;
}

export function inMemoryTarget(): StoreTarget {
  return {
    name: 'InMemoryTaskStore (SDK control)',
    defaultTtl: null,
    noExpiryTtl: null,
    sessions: false,
    pageSize: 10,
    async setup() {},
    subject() {
      const store = new InMemoryTaskStore();
      return { store, sessionId: undefined, dispose: () => store.cleanup() };
    },
    async teardown() {},
  };
}

const HOUR = 3_600_000;

// dev runs without a max ttl (so `ttl: null` is granted as null); serve keeps
// its 7 d maximum (so `ttl: null` becomes the maximum): both settlements of
// no_expiry get exercised.
const BACKEND_ARGS: Record<Backend, { args: string[]; noExpiryTtl: number | null }> = {
  dev: { args: ['--default-ttl', '1h', '--max-ttl', 'unlimited'], noExpiryTtl: null },
  serve: { args: ['--default-ttl', '1h', '--max-ttl', '7d'], noExpiryTtl: 7 * 24 * HOUR },
};

export function grpcTarget(backend: Backend): StoreTarget {
  let service: RunningService | undefined;
  let shared: GrpcTaskStore | undefined;
  return {
    name: `GrpcTaskStore on taskstore ${backend}`,
    defaultTtl: HOUR,
    noExpiryTtl: BACKEND_ARGS[backend].noExpiryTtl,
    sessions: true,
    pageSize: 10,
    async setup() {
      service = await startService(backend, { args: BACKEND_ARGS[backend].args });
      shared = new GrpcTaskStore({ endpoint: service.endpoint, pageSize: 10 });
    },
    subject() {
      return { store: shared!, sessionId: `contract-${randomUUID()}`, dispose() {} };
    },
    async teardown() {
      shared?.close();
      await service?.stop();
    },
  };
}
