// The worker's pieces that need no service: the command line (taskworker's
// flags and variables), durations, the broker topology and its AMQP types,
// trace contexts, error details, tool declarations and descriptions (with
// their retry policies and concurrency limits), an
// McpServer's tools on both sides, and the wire fields of the worker API.
import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';
import { z } from 'zod';
import { GrpcTaskStore, moveToolsToFleet } from '@mcp-taskstore/client';
import { amqpArguments, BackOff, childTraceparent, defineTool, toolsOfServer, topologyFor } from '@mcp-taskstore/client/worker';
import { status as Status } from '@grpc/grpc-js';
import { errorInfo, errorInfoReason, TaskStoreError } from '../src/errors.js';
import { stopOfRefusal } from '../src/worker/report.js';
import { onAbort, settledWithin } from '../src/worker/control.js';
import { parseCli, parseDuration } from '../src/worker/options.js';
import { describeTool, firstText } from '../src/worker/tool.js';
import { topologyFromWire } from '../src/worker/broker.js';
import { tools as conformance } from '../src/worker/conformance.js';

const PROTO_DIR = join(dirname(fileURLToPath(import.meta.resolve('@mcp-taskstore/client'))), 'proto');

describe('the worker command line', () => {
  it('takes taskworker\'s flags, with their defaults', () => {
    const cli = parseCli(['./tools.js', '--endpoint', 'http://h:1', '--concurrency', '8', '--shutdown-grace', '2s', '--worker-id', 'w1', '--queue-prefix', 'p'], {});
    assert.ok(cli !== 'help');
    assert.equal(cli.module, './tools.js');
    assert.deepEqual(cli.worker, {
      endpoint: 'http://h:1',
      amqpUrl: 'amqp://guest:guest@127.0.0.1:5672/%2f',
      queueType: 'quorum',
      concurrency: 8,
      shutdownGraceMs: 2000,
      parkAfterMs: 60_000,
      stopGraceMs: 5000,
      queuePrefix: 'p',
      workerId: 'w1',
    });
    assert.equal(cli.logFormat, 'text');
  });

  it('falls back to the TASKWORKER_ variables', () => {
    const cli = parseCli(['m.js'], { TASKWORKER_TOKEN: 'k', TASKWORKER_CONCURRENCY: '3', TASKWORKER_LOG_FORMAT: 'json', TASKWORKER_AMQP_URL: 'amqps://b' });
    assert.ok(cli !== 'help');
    assert.equal(cli.worker.token, 'k');
    assert.equal(cli.worker.concurrency, 3);
    assert.equal(cli.worker.amqpUrl, 'amqps://b');
    assert.equal(cli.logFormat, 'json');
    assert.equal(cli.worker.queuePrefix, undefined, 'no prefix given: the service announces it');
  });

  for (const [args, why] of [
    [[], /exactly one module/],
    [['m.js', '--concurrency', '0'], /--concurrency/],
    [['m.js', '--queue-type', 'lazy'], /quorum or classic/],
    [['m.js', '--client-cert', 'c.pem'], /--client-cert and --client-key go together/],
    [['m.js', '--shutdown-grace', 'soon'], /invalid duration/],
    [['m.js', '--no-such-flag', 'x'], /Unknown option/],
  ] as const) {
    it(`refuses ${JSON.stringify(args)}`, () => assert.throws(() => parseCli([...args], {}), why));
  }

  it('refuses --token together with --token-file', () => {
    assert.throws(() => parseCli(['m.js', '--token', 'a'], { TASKWORKER_TOKEN_FILE: '/nonexistent' }), /not both/);
  });

  it('reads durations as taskworker does', () => {
    for (const [raw, ms] of [['30s', 30_000], ['500ms', 500], ['1m', 60_000], ['1h30m', 5_400_000], ['0', 0], ['2d', 172_800_000]] as const) {
      assert.equal(parseDuration(raw), ms, raw);
    }
    assert.throws(() => parseDuration('5 parsecs'));
  });
});

describe('the broker topology', () => {
  it('names and arguments as proto/src/jobs.rs writes them', () => {
    assert.deepEqual(topologyFor('ci-7'), { exchange: 'ci-7.jobs', toolQueuePrefix: 'ci-7.tool.', queueArguments: [{ name: 'x-queue-type', text: 'quorum' }] });
    const classic = topologyFor('p', 'classic');
    // An integer travels as an AMQP signed 32-bit long int ('I'), as lapin sends it, not as the byte amqplib would guess.
    assert.deepEqual(amqpArguments(classic.queueArguments), { 'x-queue-type': 'classic', 'x-queue-version': { '!': 'int', value: 2 } });
  });

  it('reads the oneof of a Heartbeat answer', () => {
    const wire = { exchange: 'e', toolQueuePrefix: 'q.', queueArguments: [{ name: 'x-queue-type', text: 'quorum', integer: 0 }, { name: 'x-queue-version', text: '', integer: 2 }] };
    assert.deepEqual(topologyFromWire(wire).queueArguments, [{ name: 'x-queue-type', text: 'quorum' }, { name: 'x-queue-version', integer: 2 }]);
  });
});

describe('trace contexts and error details', () => {
  it("makes a child of the job's traceparent: same trace and flags, a new span", () => {
    const child = childTraceparent('00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01')!;
    assert.match(child, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    assert.notEqual(child.split('-')[2], '00f067aa0ba902b7');
    assert.equal(childTraceparent(undefined), undefined);
    assert.equal(childTraceparent('00-00000000000000000000000000000000-00f067aa0ba902b7-01'), undefined);
    assert.equal(childTraceparent('garbage'), undefined);
  });

  it('reads the ErrorInfo reason of grpc-status-details-bin', () => {
    const str = (field: number, s: Buffer | string) => {
      const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
      return Buffer.concat([Buffer.from([(field << 3) | 2, b.length]), b]);
    };
    const info = str(1, 'QUESTION_KEY_REUSED');
    const any = Buffer.concat([str(1, 'type.googleapis.com/google.rpc.ErrorInfo'), str(2, info)]);
    const status = Buffer.concat([Buffer.from([0x08, 9]), str(2, 'refused'), str(3, any)]);
    assert.equal(errorInfoReason(status), 'QUESTION_KEY_REUSED');
    assert.equal(errorInfoReason(Buffer.from([0xff, 0xff])), undefined);
    assert.equal(errorInfoReason(undefined), undefined);
  });

  it('reads the ErrorInfo metadata, and only of an ErrorInfo', () => {
    const str = (field: number, s: Buffer | string) => {
      const b = Buffer.isBuffer(s) ? s : Buffer.from(s);
      return Buffer.concat([Buffer.from([(field << 3) | 2, b.length]), b]);
    };
    const entry = Buffer.concat([str(1, 'status'), str(2, 'cancelled')]);
    const info = Buffer.concat([str(1, 'FENCE_TERMINAL'), str(2, 'mcp-taskstore'), str(3, entry)]);
    const status = (typeUrl: string) =>
      Buffer.concat([Buffer.from([0x08, 9]), str(2, 'refused'), str(3, Buffer.concat([str(1, typeUrl), str(2, info)]))]);
    assert.deepEqual(errorInfo(status('type.googleapis.com/google.rpc.ErrorInfo')), { reason: 'FENCE_TERMINAL', metadata: { status: 'cancelled' } });
    assert.equal(errorInfo(status('type.googleapis.com/google.rpc.RetryInfo')), undefined);
  });

  it('waits for the first session at most a while, and not once told to stop', async () => {
    const never = new Promise<void>(() => {});
    const running = new AbortController();
    assert.equal(await settledWithin(never, 50, running.signal), false);
    assert.equal(await settledWithin(Promise.resolve(), 60_000, running.signal), true);
    // Told to stop while waiting, and before it began: it ends at once (well before the guard).
    const guarded = (wait: Promise<boolean>) =>
      Promise.race([wait, new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), 10_000).unref())]);
    const stopping = new AbortController();
    setTimeout(() => stopping.abort(), 10);
    assert.equal(await guarded(settledWithin(never, 60_000, stopping.signal)), false);
    assert.equal(await guarded(settledWithin(never, 60_000, stopping.signal)), false);
  });

  it('calls each waiter on a shared signal once, through one listener, unless it stopped waiting', () => {
    const shared = new AbortController();
    const called: number[] = [];
    const offs = Array.from({ length: 10_000 }, (_, i) => onAbort(shared.signal, () => called.push(i)));
    const same = () => called.push(-1);
    onAbort(shared.signal, same);
    onAbort(shared.signal, same); // the same callback may wait twice
    for (let i = 0; i < 10_000; i += 2) offs[i]!();
    assert.equal(getEventListeners(shared.signal, 'abort').length, 1);
    shared.abort();
    shared.abort();
    assert.equal(called.length, 5_002);
    assert.ok(called.slice(0, 5_000).every((i) => i % 2 === 1));
    assert.deepEqual(called.slice(5_000), [-1, -1]);
    // Already aborted: called at once, and stopping is a no-op.
    let late = 0;
    onAbort(shared.signal, () => late++)();
    assert.equal(late, 1);
  });

  it('stops an attempt on a refused report only when the attempt is over', () => {
    const refused = (reason?: string, metadata?: Record<string, string>) =>
      new TaskStoreError(Status.FAILED_PRECONDITION, 'refused', { ...(reason !== undefined && { reason }), ...(metadata && { metadata }) });
    assert.equal(stopOfRefusal(refused('FENCE_TERMINAL', { status: 'cancelled' })), 'cancelled');
    assert.equal(stopOfRefusal(refused('FENCE_TERMINAL', { status: 'completed' })), 'finished');
    assert.equal(stopOfRefusal(refused('FENCE_TERMINAL')), 'finished');
    assert.equal(stopOfRefusal(refused('FENCE_LEASE_LOST')), 'lease_lost');
    assert.equal(stopOfRefusal(new TaskStoreError(Status.NOT_FOUND, 'no such task')), 'gone');
    // Refusals that do not say the attempt is over, outages and other errors stop nothing.
    assert.equal(stopOfRefusal(refused('QUESTION_KEY_REUSED')), undefined);
    assert.equal(stopOfRefusal(refused()), undefined);
    assert.equal(stopOfRefusal(new TaskStoreError(Status.UNAVAILABLE, 'down', { reason: 'FENCE_LEASE_LOST' })), undefined);
    assert.equal(stopOfRefusal(new Error('boom')), undefined);
  });
});

describe('tools', () => {
  it('describes a zod-declared tool as the SDK lists it', () => {
    const tool = defineTool('add', { title: 'Add', description: 'Adds', inputSchema: { a: z.number(), b: z.number().optional() }, taskSupport: 'required' }, ({ a, b }) => String(a + (b ?? 0)));
    const d = describeTool(tool);
    assert.deepEqual([d.name, d.title, d.description, d.taskSupport], ['add', 'Add', 'Adds', 'TASK_SUPPORT_REQUIRED']);
    const schema = JSON.parse(d.inputSchemaJson) as { type: string; properties: Record<string, unknown>; required: string[] };
    assert.equal(schema.type, 'object');
    assert.deepEqual(schema.properties['a'], { type: 'number' });
    assert.deepEqual(schema.required, ['a']);
    assert.throws(() => defineTool('bad name', {}, () => ''), /invalid tool name/);
    assert.equal(d.retry, undefined, 'no policy declared, none sent');
  });

  it('sends a declared retry policy with the description, leaving out what it leaves out', () => {
    const tool = defineTool('flaky', { retry: { maxAttempts: 5, backoffBaseMs: 250, retryLostWorkers: false } }, () => '');
    assert.deepEqual(describeTool(tool).retry, { maxAttempts: 5, backoffBase: { seconds: 0, nanos: 250_000_000 }, retryLostWorkers: false });
  });

  it('sends a declared concurrency limit with the description, in the heartbeat as the service reads it', () => {
    const perCustomer = defineTool('per_customer', { inputSchema: { customer_id: z.string() }, concurrency: { max: 3, key: 'tenant, arguments.customer_id' } }, ({ customer_id }) => customer_id);
    const whole = defineTool('whole_tool', { retry: { maxAttempts: 2 }, concurrency: { max: 10_000 } }, () => '');
    const plain = defineTool('plain', {}, () => '');
    assert.deepEqual(describeTool(perCustomer).concurrency, { max: 3, key: 'tenant, arguments.customer_id' });
    assert.equal(describeTool(perCustomer).retry, undefined, 'a limit declares no retry policy');
    assert.deepEqual(describeTool(whole).concurrency, { max: 10_000, key: '' }, 'no key: one for the whole tool');
    assert.deepEqual(describeTool(whole).retry, { maxAttempts: 2 });
    assert.equal(describeTool(plain).concurrency, undefined, 'no limit declared, none sent');
    // What was declared is what is sent, whatever happens to the object given afterwards.
    const given = { max: 2, key: 'session' };
    const copied = defineTool('copied', { concurrency: given }, () => '');
    given.max = 0;
    assert.deepEqual(describeTool(copied).concurrency, { max: 2, key: 'session' });
    // Through the HeartbeatRequest's serializer (with the worker's loader options) and back: field 7 survives.
    const def = protoLoader.loadSync('mcp/tasks/v1/execution.proto', { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: false, includeDirs: [PROTO_DIR] });
    const heartbeat = (def['mcp.tasks.v1.TaskExecution'] as Record<string, { requestSerialize(v: unknown): Buffer; requestDeserialize(b: Buffer): unknown }>)['Heartbeat']!;
    const tools = [perCustomer, whole, plain];
    const sent = heartbeat.requestSerialize({ workerId: 'w', tools: tools.map((t) => t.name), slots: 1, busy: 0, stopping: false, descriptions: tools.map(describeTool) });
    const read = heartbeat.requestDeserialize(sent) as { descriptions: Array<{ name: string; concurrency: unknown }> };
    assert.deepEqual(read.descriptions.map((d) => [d.name, d.concurrency]), [
      ['per_customer', { max: 3, key: 'tenant, arguments.customer_id' }],
      ['whole_tool', { max: 10_000, key: '' }],
      ['plain', null],
    ]);
  });

  it('sends a declared rate with the description, and refuses at declaration a rate the service would refuse', () => {
    const quotes = defineTool('quotes', { rate: { starts: 20, perMs: 1000, key: 'tenant' }, concurrency: { max: 3 } }, () => '');
    assert.deepEqual(describeTool(quotes).rate, { starts: 20, per: { seconds: 1, nanos: 0 }, key: 'tenant' });
    assert.deepEqual(describeTool(quotes).concurrency, { max: 3, key: '' }, 'a rate and a limit go together');
    assert.deepEqual(describeTool(defineTool('fast', { rate: { starts: 1, perMs: 10 } }, () => '')).rate, { starts: 1, per: { seconds: 0, nanos: 10_000_000 }, key: '' });
    assert.equal(describeTool(defineTool('plain', {}, () => '')).rate, undefined);
    const refused: Array<[unknown, ErrorConstructor, RegExp]> = [
      [{ starts: 0, perMs: 1000 }, RangeError, /rate starts must be between 1 and 100000, got 0/],
      [{ starts: 100_001, perMs: 1000 }, RangeError, /between 1 and 100000/],
      [{ starts: 2.5, perMs: 1000 }, TypeError, /starts must be an integer/],
      [{ starts: 5, perMs: 9 }, RangeError, /perMs must be between 10 ms and 24 h, got 9/],
      [{ starts: 5, perMs: 86_400_001 }, RangeError, /perMs must be between 10 ms and 24 h/],
      [{ starts: 5, perMs: '1s' }, TypeError, /perMs must be an integer number of ms/],
      [{ starts: 5, per: 1000 }, TypeError, /has no "per" \(only starts, perMs and key\)/],
      [{ starts: 5, perMs: 1000, key: 'customer_id' }, RangeError, /key term "customer_id" is not tenant/],
      [20, TypeError, /must be an object \{ starts, perMs, key\? \}, got 20/],
    ];
    for (const [rate, type, message] of refused) {
      assert.throws(() => defineTool('rated', { rate: rate as never }, () => ''), (err: Error) => {
        assert.ok(err instanceof type, `${JSON.stringify(rate)}: ${err.name} ${err.message}`);
        assert.match(err.message, /^tool rated: rate /);
        assert.match(err.message, message);
        return true;
      }, JSON.stringify(rate));
    }
  });

  it('takes every concurrency key the service takes', () => {
    const keys = ['', 'tenant', 'tool, session', ' tenant , arguments.customer.id ', 'arguments.a-b_C9', Array(8).fill('tenant').join(','),
      `arguments.${Array(8).fill('n').join('.')}`, `arguments.${'x'.repeat(64)}`, `tenant${' '.repeat(250)}`];
    for (const key of keys) assert.equal(describeTool(defineTool('t', { concurrency: { max: 1, key } }, () => '')).concurrency?.key, key, JSON.stringify(key));
  });

  it('refuses, at declaration, a concurrency limit the service would refuse', () => {
    const refused: Array<[unknown, ErrorConstructor, RegExp]> = [
      [{ max: 0 }, RangeError, /concurrency max must be between 1 and 10000, got 0/],
      [{ max: 10_001 }, RangeError, /between 1 and 10000, got 10001/],
      [{ max: -1 }, RangeError, /between 1 and 10000/],
      [{ max: 2.5 }, TypeError, /max must be an integer, got 2\.5/],
      [{ max: Number.NaN }, TypeError, /max must be an integer, got NaN/],
      [{ max: '3' }, TypeError, /max must be an integer, got "3"/],
      [{ max: true }, TypeError, /max must be an integer/],
      [{ key: 'tenant' }, TypeError, /max must be an integer, got undefined/],
      [{ max: 3, key: null }, TypeError, /key must be a string, got null/],
      [{ max: 3, key: ['tenant'] }, TypeError, /key must be a string/],
      [{ max: 3, keys: 'tenant' }, TypeError, /has no "keys" \(only max and key\)/],
      [3, TypeError, /must be an object \{ max, key\? \}, got 3/],
      [null, TypeError, /must be an object/],
      [[3, 'tenant'], TypeError, /must be an object/],
      [{ max: 3, key: `tenant${' '.repeat(251)}` }, RangeError, /key must be at most 256 characters, got 257/],
      [{ max: 3, key: 'customer_id' }, RangeError, /key term "customer_id" is not tenant, tool, session or arguments\.<path>/],
      [{ max: 3, key: 'tenant,' }, RangeError, /key term "" is not/],
      [{ max: 3, key: 'arguments.' }, RangeError, /key term "arguments\." is not/],
      [{ max: 3, key: 'arguments.a..b' }, RangeError, /is not tenant/],
      [{ max: 3, key: 'arguments.a b' }, RangeError, /is not tenant/],
      [{ max: 3, key: 'arguments.\u00e9' }, RangeError, /is not tenant/],
      [{ max: 3, key: `arguments.${'x'.repeat(65)}` }, RangeError, /is not tenant/],
      [{ max: 3, key: `arguments.${Array(9).fill('n').join('.')}` }, RangeError, /is not tenant/],
      [{ max: 3, key: Array(9).fill('tool').join(',') }, RangeError, /more than 8 terms/],
    ];
    for (const [concurrency, type, message] of refused) {
      assert.throws(() => defineTool('limited', { concurrency: concurrency as never }, () => ''), (err: Error) => {
        assert.ok(err instanceof type, `${JSON.stringify(concurrency)}: ${err.name} ${err.message}`);
        assert.match(err.message, /^tool limited: concurrency /);
        assert.match(err.message, message);
        return true;
      }, JSON.stringify(concurrency));
    }
  });

  it('sends a declared fairness key with the description, and refuses at declaration one the service would refuse', () => {
    const perCustomer = defineTool('per_customer', { fairnessKey: 'arguments.customerId' }, () => '');
    assert.equal(describeTool(perCustomer).fairnessKey, 'arguments.customerId');
    assert.equal(describeTool(defineTool('plain', {}, () => '')).fairnessKey, '', 'none declared: first in, first out');
    const refused: Array<[unknown, ErrorConstructor, RegExp]> = [
      ['customerId', RangeError, /fairness key term "customerId" is not tenant/],
      ['tenant' + ' '.repeat(251), RangeError, /fairness key must be at most 256 characters/],
      [Array(9).fill('tool').join(','), RangeError, /more than 8 terms/],
      [['tenant'], TypeError, /fairness key must be a string/],
    ];
    for (const [key, type, message] of refused) {
      assert.throws(() => defineTool('fair', { fairnessKey: key as never }, () => ''), (err: Error) => {
        assert.ok(err instanceof type, `${JSON.stringify(key)}: ${err.name} ${err.message}`);
        assert.match(err.message, message);
        return true;
      });
    }
  });

  it("takes a failed result's first text line, at most 1 KiB, for the status message", () => {
    assert.equal(firstText({ content: [{ type: 'image', data: '', mimeType: 'image/png' }, { type: 'text', text: '\n  disk full  \nmore' }] }), 'disk full');
    assert.equal(firstText({ content: [] }), undefined);
    const cut = firstText({ content: [{ type: 'text', text: 'é'.repeat(1000) }] })!;
    assert.ok(Buffer.byteLength(cut) <= 1024 && /^é+$/.test(cut));
  });

  it('a BackOff carries the time its key may start again', () => {
    const before = Date.now();
    const backOff = BackOff.after(30_000, 'rate limited');
    assert.ok(backOff instanceof Error);
    assert.equal(backOff.message, 'rate limited');
    assert.ok(backOff.until.getTime() >= before + 30_000 && backOff.until.getTime() <= Date.now() + 30_000);
    assert.equal(new BackOff(new Date(0)).message, 'backing off');
    assert.throws(() => BackOff.after(-1), RangeError);
    assert.throws(() => BackOff.after(Number.NaN), RangeError);
    assert.throws(() => new BackOff(new Date('not a time')), RangeError);
  });

  it('ships exactly the conformance tools of docs/worker-conformance.md', () => {
    assert.deepEqual(conformance.map((t) => t.name), ['conf_echo', 'conf_tool_error', 'conf_retryable', 'conf_back_off', 'conf_crash', 'conf_sleep', 'conf_noop', 'conf_ask']);
    for (const tool of conformance) {
      assert.ok(tool.description, `${tool.name} has a description`);
      assert.equal((JSON.parse(describeTool(tool).inputSchemaJson) as { type: string }).type, 'object');
    }
  });

  it("moves an McpServer's tools to the fleet and keeps the originals for its workers", async () => {
    const store = new GrpcTaskStore({ endpoint: 'http://127.0.0.1:1' });
    try {
      const server = new McpServer({ name: 's', version: '1' }, { capabilities: { tasks: { requests: { tools: { call: {} } } } }, taskStore: store, taskMessageQueue: new InMemoryTaskMessageQueue() });
      server.registerTool('shout', { description: 'Shouts', inputSchema: { text: z.string() } }, ({ text }) => ({ content: [{ type: 'text', text: text.toUpperCase() }] }));
      assert.deepEqual(moveToolsToFleet(server, store), ['shout']);
      const [tool] = toolsOfServer(server);
      assert.equal(tool?.name, 'shout');
      assert.equal(tool?.description, 'Shouts');
      const ctx = { signal: new AbortController().signal, taskId: 't', tenantId: 'd', attempt: 1, maxAttempts: 1, traceparent: undefined, progress: async () => {}, ask: async () => ({}), elicit: async () => ({}) };
      assert.deepEqual(await tool!.handler({ text: 'hi' }, ctx), { content: [{ type: 'text', text: 'HI' }] }, 'the original handler');
    } finally {
      store.close();
    }
  });
});

describe('wire shape of the worker API', () => {
  const expected: Record<string, string[]> = {
    HoldTaskRequest: ['taskId', 'sessionId', 'holder', 'leaseToken'],
    HoldTaskResponse: ['leaseToken', 'leaseDuration', 'keepRunning', 'reason', 'stopReason'],
    ClaimTaskRequest: ['taskId', 'generation', 'workerId', 'tenantId'],
    ClaimTaskResponse: ['leaseToken', 'leaseDuration', 'attempt', 'maxAttempts', 'tool', 'requestJson'],
    RenewLeaseRequest: ['taskId', 'leaseToken', 'tenantId'],
    RenewLeaseResponse: ['keepRunning', 'reason', 'stopReason'],
    ReleaseTaskRequest: ['taskId', 'leaseToken', 'reason', 'message', 'tenantId'],
    ReleaseTaskResponse: ['willRetry', 'retryIn', 'parked'],
    AskQuestionRequest: ['taskId', 'leaseToken', 'tenantId', 'key', 'requestJson'],
    AskQuestionResponse: ['answerJson'],
    HeartbeatRequest: ['workerId', 'tools', 'slots', 'busy', 'stopping', 'descriptions'],
    HeartbeatResponse: ['interval', 'topology'],
    ToolDescription: ['name', 'title', 'description', 'inputSchemaJson', 'taskSupport', 'retry', 'concurrency', 'rate', 'fairnessKey'],
    ConcurrencyLimit: ['max', 'key'],
    RetryPolicy: ['maxAttempts', 'backoffBase', 'backoffMax', 'retryErrors', 'retryLostWorkers'],
    QueueTopology: ['exchange', 'toolQueuePrefix', 'queueArguments'],
    QueueArgument: ['name', 'text', 'integer'],
    JobMessage: ['tenantId', 'taskId', 'generation', 'tool'],
  };
  const def = protoLoader.loadSync('mcp/tasks/v1/task_store.proto', { keepCase: false, includeDirs: [PROTO_DIR] });
  for (const [message, fields] of Object.entries(expected)) {
    it(`${message} has the fields the worker uses`, () => {
      const type = def[`mcp.tasks.v1.${message}`] as { type: { field: Array<{ name: string; jsonName: string }> } };
      assert.ok(type, `${message} exists`);
      const names = type.type.field.map((f) => f.jsonName || f.name.replace(/_(\w)/g, (_, c: string) => c.toUpperCase()));
      for (const f of fields) assert.ok(names.includes(f), `${message}.${f} in ${names.join(',')}`);
    });
  }
});
