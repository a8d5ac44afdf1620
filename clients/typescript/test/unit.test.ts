// Pieces that need no service: conversions, endpoint parsing, the proto
// fields the hand-written wire types rely on, and failing fast without a
// service.
import assert from 'node:assert/strict';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { GrpcTaskStore, TaskStoreClient, TaskStoreError } from '@mcp-taskstore/client';
import * as protoLoader from '@grpc/proto-loader';

// The .proto copy the built package ships and loads.
const PROTO_DIR = join(dirname(fileURLToPath(import.meta.resolve('@mcp-taskstore/client'))), 'proto');

describe('wire shape', () => {
  // src/wire.ts is written by hand; these are the fields it names.
  const expected: Record<string, string[]> = {
    Task: ['taskId', 'status', 'statusMessage', 'createdAt', 'lastUpdatedAt', 'ttl', 'pollInterval', 'sessionId', 'tool'],
    CreateTaskRequest: ['taskId', 'sessionId', 'ttl', 'requestIdJson', 'requestJson', 'dispatch', 'noExpiry', 'pollInterval'],
    Dispatch: ['tool', 'maxAttempts'],
    UpdateTaskStatusRequest: ['taskId', 'status', 'statusMessage', 'sessionId', 'leaseToken'],
    StoreTaskResultRequest: ['taskId', 'status', 'resultJson', 'sessionId', 'statusMessage', 'leaseToken'],
    GetTaskResultRequest: ['taskId', 'sessionId', 'wait'],
    GetTaskResultResponse: ['status', 'resultJson', 'task'],
    ListTasksRequest: ['cursor', 'sessionId', 'pageSize', 'statuses', 'tool'],
    ListTasksResponse: ['tasks', 'nextCursor'],
    DeleteTaskRequest: ['taskId', 'sessionId'],
    ServedTool: ['name', 'workers', 'slots', 'busy', 'lastSeenAt', 'description'],
    InputRequest: ['key', 'requestJson', 'askedAt', 'answerJson', 'answeredAt'],
    ListInputRequestsRequest: ['taskId', 'sessionId'],
    ListInputRequestsResponse: ['inputRequests'],
    AnswerInputRequestsRequest: ['taskId', 'sessionId', 'answersJson'],
    AnswerInputRequestsResponse: ['task', 'taken', 'ignored'],
  };
  const def = protoLoader.loadSync('mcp/tasks/v1/task_store.proto', { keepCase: false, includeDirs: [PROTO_DIR] });
  for (const [message, fields] of Object.entries(expected)) {
    it(`${message} has the fields the client uses`, () => {
      const type = def[`mcp.tasks.v1.${message}`] as { type: { field: Array<{ name: string; jsonName: string }> } };
      assert.ok(type, `${message} exists`);
      const names = type.type.field.map((f) => f.jsonName || f.name.replace(/_(\w)/g, (_, c: string) => c.toUpperCase()));
      for (const f of fields) assert.ok(names.includes(f), `${message}.${f} in ${names.join(',')}`);
    });
  }
  it('the service has every RPC the client calls', () => {
    const svc = def['mcp.tasks.v1.TaskStore'] as Record<string, unknown>;
    for (const rpc of ['CreateTask', 'GetTask', 'UpdateTaskStatus', 'StoreTaskResult', 'GetTaskResult', 'ListTasks', 'WatchTask', 'CancelTask', 'DeleteTask', 'CleanupExpired', 'ListTools', 'ListInputRequests', 'AnswerInputRequests']) {
      assert.ok(svc[rpc], rpc);
    }
  });
});

describe('endpoints', () => {
  for (const endpoint of ['http://127.0.0.1:50051', '127.0.0.1:50051', 'http://localhost:1/', 'https://example.invalid:443']) {
    it(`accepts ${endpoint}`, () => new TaskStoreClient({ endpoint }).close());
  }
  for (const endpoint of ['ftp://x:1', 'http://a:1/path', '']) {
    it(`refuses ${JSON.stringify(endpoint)}`, () => assert.throws(() => new TaskStoreClient({ endpoint })));
  }
  it('refuses TLS material on a plaintext endpoint', () => {
    assert.throws(() => new TaskStoreClient({ endpoint: 'http://127.0.0.1:1', tls: { ca: 'x' } }), /https/);
  });
});

describe('without a service', () => {
  it('fails a call with UNAVAILABLE rather than hanging', async () => {
    // Port 1 on loopback: nothing listens there.
    const client = new TaskStoreClient({ endpoint: 'http://127.0.0.1:1', timeoutMs: 3000 });
    try {
      await assert.rejects(client.getTask('t'), (e) => e instanceof TaskStoreError && ['UNAVAILABLE', 'DEADLINE_EXCEEDED'].includes(e.codeName));
    } finally {
      client.close();
    }
  });

  it('answers null for an id the service could never hold, without a call', async () => {
    const store = new GrpcTaskStore({ endpoint: 'http://127.0.0.1:1', timeoutMs: 1000 });
    try {
      assert.equal(await store.getTask('has space'), null);
      assert.equal(await store.getTask(''), null);
      assert.equal(await store.getTask('x'.repeat(129)), null);
    } finally {
      store.close();
    }
  });

  it('honours an abort signal', async () => {
    const client = new TaskStoreClient({ endpoint: 'http://127.0.0.1:1', timeoutMs: 10_000 });
    try {
      const ac = new AbortController();
      ac.abort();
      await assert.rejects(client.getTask('t', { signal: ac.signal }), (e) => e instanceof TaskStoreError && e.codeName === 'CANCELLED');
    } finally {
      client.close();
    }
  });
});
