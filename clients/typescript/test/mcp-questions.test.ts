// Issue 23's proof: a real SDK 1.x Client with an elicitation handler calls
// a tool as a task through `taskstore mcp` (the gateway replica, revision
// 2025-11-25), and the tool asks it a question. The tool is a Python command
// tool (test/fixtures/confirm_tool.py, `interactive`) run by a taskworker of
// a serve-mode service (PostgreSQL + RabbitMQ). The SDK's callToolStream
// polls tasks/get, sees input_required and calls tasks/result; the gateway
// answers that as an SSE stream whose first event is the question, an
// `elicitation/create` request; the SDK runs the Client's ElicitRequest
// handler and POSTs its result to /mcp; the tool reads it on stdin and
// finishes, and the stream ends with the result. Then the same with the
// gateway killed while the handler holds the question (the SDK resumes the
// tasks/result stream on the restarted gateway by itself, with the
// question's event id as Last-Event-ID), and with the worker killed while
// the tool waits for its answer.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  CallToolResultSchema,
  ElicitRequestSchema,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type ElicitRequest,
  type ElicitResult,
} from '@modelcontextprotocol/sdk/types.js';
import { TaskStoreClient } from '@mcp-taskstore/client';
import {
  freePort,
  logLine,
  startGateway,
  startService,
  stopProcess,
  type Gateway,
  type LoggedProcess,
  type RunningService,
} from './helpers/service.js';

const REQUEST = { timeout: 30_000 };
const CASE = { timeout: 60_000 };
// build-test/test -> the package root -> test/fixtures (the .py is not compiled).
const TOOL = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', 'test', 'fixtures', 'confirm_tool.py');
const ACCEPT: ElicitResult = { action: 'accept', content: { confirm: true } };

const textOf = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

interface Asked {
  id: string | number;
  taskId: string | undefined;
  params: ElicitRequest['params'];
}

// One POST the SDK's transport made to /mcp, and how it was answered.
interface Post {
  message: { id?: string | number; method?: string; params?: Record<string, unknown>; result?: unknown };
  status: number;
  contentType: string | null;
  /** The gateway process that answered it. */
  gatewayPid: number | undefined;
}

// One GET (a stream opened or resumed), and how it was answered.
interface Get {
  lastEventId: string | null;
  status: number;
  gatewayPid: number | undefined;
}

interface Run {
  taskId: string;
  kinds: string[];
  statuses: string[];
  result?: CallToolResult;
  error?: Error;
}

describe('questions through taskstore mcp with the TypeScript SDK client', () => {
  let dir = '';
  let journal = '';
  let service: RunningService;
  let gateway: Gateway;
  let mcpListen = '';
  let client: Client;
  let transport: StreamableHTTPClientTransport;
  let grpc: TaskStoreClient;
  // What the Client's handler saw, and what it does with the next question.
  const asked: Asked[] = [];
  let answer: (request: ElicitRequest) => Promise<ElicitResult> = async () => ACCEPT;
  const clientErrors: string[] = [];
  const posts: Post[] = [];
  const gets: Get[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ts-mcp-questions-'));
    journal = join(dir, 'journal.jsonl');
    const tools = join(dir, 'tools.json');
    writeFileSync(tools, JSON.stringify({
      tools: {
        confirm: {
          command: ['python3', TOOL],
          interactive: true,
          env: { CONFIRM_JOURNAL: journal },
          description: 'Asks the caller to confirm `what`, then says what was answered.',
          input_schema: { type: 'object', properties: { what: { type: 'string' } }, required: ['what'] },
          task_support: 'optional',
        },
      },
    }));
    // Short leases: a killed worker's task is dispatched again within ~2.5 s.
    service = await startService('serve', {
      workerTools: 'echo',
      commandTools: { file: tools, tools: ['confirm'] },
      args: ['--lease-duration', '2s', '--reaper-interval', '500ms'],
    });
    grpc = new TaskStoreClient({ endpoint: service.endpoint });
    mcpListen = `127.0.0.1:${await freePort()}`;
    gateway = await startGateway(service, mcpListen);

    client = new Client({ name: 'taskstore-questions-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    client.setRequestHandler(ElicitRequestSchema, async (request, extra) => {
      const related = request.params._meta?.[RELATED_TASK_META_KEY] as { taskId?: string } | undefined;
      asked.push({ id: extra.requestId, taskId: related?.taskId, params: request.params });
      return answer(request);
    });
    client.onerror = (err) => clientErrors.push(err.message);
    // The SDK's transport with a fetch that records every POST and GET it makes.
    const recording = async (url: string | URL, init?: RequestInit): Promise<Response> => {
      const gatewayPid = gateway.proc.pid;
      const response = await fetch(url, init);
      if (init?.method === 'POST' && typeof init.body === 'string') {
        posts.push({ message: JSON.parse(init.body) as Post['message'], status: response.status, contentType: response.headers.get('content-type'), gatewayPid });
      }
      if (init?.method === 'GET') {
        gets.push({ lastEventId: new Headers(init.headers).get('last-event-id'), status: response.status, gatewayPid });
      }
      return response;
    };
    transport = new StreamableHTTPClientTransport(gateway.url, { fetch: recording });
    await client.connect(transport, REQUEST);
  });
  after(async () => {
    await client?.close();
    grpc?.close();
    if (gateway) await stopProcess(gateway.proc);
    await service?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  // Calls `confirm` as a task with the SDK's callToolStream and collects
  // what it yields until it ends.
  async function callConfirm(what: string, onresumptiontoken?: (id: string) => void): Promise<Run> {
    const run: Run = { taskId: '', kinds: [], statuses: [] };
    const options = { ...REQUEST, task: { ttl: 300_000 }, ...(onresumptiontoken ? { onresumptiontoken } : {}) };
    for await (const msg of client.experimental.tasks.callToolStream({ name: 'confirm', arguments: { what } }, CallToolResultSchema, options)) {
      run.kinds.push(msg.type);
      if (msg.type === 'taskCreated') run.taskId = msg.task.taskId;
      if (msg.type === 'taskStatus') run.statuses.push(msg.task.status);
      if (msg.type === 'result') run.result = msg.result as CallToolResult;
      if (msg.type === 'error') run.error = msg.error;
    }
    return run;
  }

  // The tool's journal lines of one task, as `event@attempt`.
  function journalOf(taskId: string): string[] {
    if (!existsSync(journal)) return [];
    return readFileSync(journal, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as { task: string; attempt: number; event: string })
      .filter((e) => e.task === taskId)
      .map((e) => `${e.event}@${e.attempt}`);
  }

  const askedFor = (taskId: string) => asked.filter((a) => a.taskId === taskId);
  // The POSTs that carried the client's response to request `id`.
  const responsesTo = (id: string | number) => posts.filter((p) => p.message.id === id && p.message.method === undefined);

  // The store's view: exactly one question, answered with `want`.
  async function assertOneAnsweredQuestion(taskId: string, want: ElicitResult) {
    const questions = await grpc.listInputRequests(taskId);
    assert.equal(questions.length, 1, JSON.stringify(questions));
    assert.equal(questions[0]!.key, 'confirm');
    assert.equal(questions[0]!.request.method, 'elicitation/create');
    assert.deepEqual(questions[0]!.answer, want);
  }

  it('delivers the question on the tasks/result stream, and the tool finishes with the answer', CASE, async () => {
    answer = async () => ACCEPT;
    const run = await callConfirm('deploy');
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(run.kinds[0], 'taskCreated');
    assert.equal(run.kinds.at(-1), 'result');
    // callToolStream went to tasks/result because the task asked.
    assert.equal(run.statuses.at(-1), 'input_required');

    const [question, ...more] = askedFor(run.taskId);
    assert.equal(more.length, 0, 'asked once');
    assert.match(String(question!.id), /^tsq\./, 'a sealed request id');
    assert.equal(question!.params.message, 'Confirm: deploy?');
    const schema = (question!.params as { requestedSchema: { properties: Record<string, { type: string }> } }).requestedSchema;
    assert.equal(schema.properties['confirm']?.type, 'boolean');
    // On the wire: tasks/result was answered as an event stream, and the
    // handler's result went back in a POST of its own, accepted with 202.
    assert.ok(posts.some((p) => p.message.method === 'tasks/result' && p.contentType?.startsWith('text/event-stream')), 'tasks/result streamed');
    const responses = responsesTo(question!.id);
    assert.equal(responses.length, 1);
    assert.deepEqual(responses[0]!.message.result, ACCEPT);
    assert.equal(responses[0]!.status, 202);

    const result = run.result!;
    assert.equal(textOf(result), 'deploy: confirmed (accept)');
    assert.deepEqual(result.structuredContent?.['answer'], ACCEPT);
    assert.equal(result.structuredContent?.['attempt'], 1);
    assert.deepEqual(result._meta?.[RELATED_TASK_META_KEY], { taskId: run.taskId });
    await assertOneAnsweredQuestion(run.taskId, ACCEPT);
    assert.deepEqual(journalOf(run.taskId), ['asked@1', 'answered@1', 'finished@1']);
  });

  it('carries a declined answer to the tool', CASE, async () => {
    answer = async () => ({ action: 'decline' });
    const run = await callConfirm('drop the table');
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(textOf(run.result!), 'drop the table: not confirmed (decline)');
    assert.equal(askedFor(run.taskId).length, 1);
    await assertOneAnsweredQuestion(run.taskId, { action: 'decline' });
  });

  it('resumes the tasks/result stream on a restarted gateway after the one that asked was killed (SIGKILL), which takes the answer', CASE, async () => {
    const sessionId = transport.sessionId;
    const killedPid = gateway.proc.pid;
    // The ids of the tasks/result stream's events, and those it had when its process died.
    const tokens: string[] = [];
    let held: string[] = [];
    let stored: Promise<Record<string, unknown>> | undefined;
    answer = async (request) => {
      // The question is here; the process whose stream brought it dies.
      await stopProcess(gateway.proc, 'SIGKILL');
      held = [...tokens];
      gateway = await startGateway(service, mcpListen);
      const taskId = (request.params._meta?.[RELATED_TASK_META_KEY] as { taskId: string }).taskId;
      stored = logLine(gateway.proc, (r) => r['message'] === 'input request answered over mcp' && r['task_id'] === taskId, 'the new gateway to store the answer', 20_000);
      stored.catch(() => {}); // awaited below
      return ACCEPT; // the SDK POSTs this to the URL: the new process
    };
    // The same call runs to its result: the SDK resumes the broken stream
    // by itself (GET with Last-Event-ID), with no help from the test.
    const run = await callConfirm('restart', (id) => tokens.push(id));
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(textOf(run.result!), 'restart: confirmed (accept)');
    assert.deepEqual(run.result!._meta?.[RELATED_TASK_META_KEY], { taskId: run.taskId });
    assert.ok(stored, 'the question reached the handler');
    const rec = await stored;
    assert.equal(rec['taken'], true, 'the restarted gateway stored the answer');
    assert.equal(rec['task_id'], run.taskId);
    assert.equal(transport.sessionId, sessionId);
    assert.ok(clientErrors.some((e) => /SSE stream disconnected/.test(e)), clientErrors.join('\n'));
    assert.ok(!clientErrors.some((e) => /Failed to send response/.test(e)), clientErrors.join('\n'));

    const [question, ...more] = askedFor(run.taskId);
    assert.equal(more.length, 0, 'asked once');
    // tasks/result was POSTed once, answered as a stream by the killed
    // process; the question was its last event before it died, and the SDK
    // resumed from there on the new process, which sent the response.
    const streamed = posts.filter((p) => p.message.method === 'tasks/result' && p.message.params?.['taskId'] === run.taskId);
    assert.equal(streamed.length, 1, 'tasks/result was sent once');
    assert.equal(streamed[0]!.gatewayPid, killedPid);
    assert.match(streamed[0]!.contentType ?? '', /^text\/event-stream/);
    assert.equal(held.length, 1, 'the question event had an id');
    const resumed = gets.filter((g) => g.lastEventId === held[0]);
    assert.equal(resumed.length, 1, JSON.stringify(gets));
    assert.equal(resumed[0]!.status, 200);
    assert.equal(resumed[0]!.gatewayPid, gateway.proc.pid);
    // The response went to the new process too.
    const responses = responsesTo(question!.id);
    assert.equal(responses.length, 1);
    assert.equal(responses[0]!.status, 202);
    assert.equal(responses[0]!.gatewayPid, gateway.proc.pid);
    assert.notEqual(gateway.proc.pid, killedPid);
    await assertOneAnsweredQuestion(run.taskId, ACCEPT);
    assert.deepEqual(journalOf(run.taskId), ['asked@1', 'answered@1', 'finished@1']);
  });

  it('gives the stored answer to the re-run after the worker was killed (SIGKILL) while the tool waited', CASE, async () => {
    const victim = service.shared!.worker;
    let second: LoggedProcess | undefined;
    let reported: Promise<Record<string, unknown>> | undefined;
    answer = async (request) => {
      // The tool waits on the worker for this answer: kill the worker, then
      // answer with no worker running; a second one re-runs the task.
      const taskId = (request.params._meta?.[RELATED_TASK_META_KEY] as { taskId: string }).taskId;
      await stopProcess(victim, 'SIGKILL');
      second = await service.shared!.startWorker();
      reported = logLine(second, (r) => r['task_id'] === taskId && r['message'] === 'attempt reported', 'the second worker to report', 30_000);
      reported.catch(() => {}); // awaited below
      return ACCEPT;
    };
    const run = await callConfirm('survive');
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(victim.signalCode, 'SIGKILL');
    // The same tasks/result stream ended with the re-run's result.
    const result = run.result!;
    assert.equal(textOf(result), 'survive: confirmed (accept)');
    assert.equal(result.structuredContent?.['attempt'], 2, 'the re-run finished');
    assert.deepEqual(result.structuredContent?.['answer'], ACCEPT);
    await reported;

    // Asked once (the re-run's question was answered from the store, not
    // sent again), answered once, finished once: one result.
    assert.equal(askedFor(run.taskId).length, 1, 'the client was asked once');
    await assertOneAnsweredQuestion(run.taskId, ACCEPT);
    const events = journalOf(run.taskId);
    assert.deepEqual(events.filter((e) => e.startsWith('asked@')), ['asked@1', 'asked@2']);
    assert.deepEqual(events.filter((e) => e.startsWith('answered@')), ['answered@2']);
    assert.deepEqual(events.filter((e) => e.startsWith('finished@')), ['finished@2']);
    const stored = await grpc.getTaskResult<CallToolResult>(run.taskId);
    assert.equal(stored.status, 'completed');
    assert.deepEqual(stored.result.structuredContent, result.structuredContent);
  });
});
