// The README's worker example, run as written: the ts block after the marker
// `<!-- ci-ts-worker: … -->` in this package's README.md is type-checked,
// compiled with the package's compiler settings and served by the package's
// worker command against a real `taskstore serve`; each of its tools is
// called as the README says: one reports progress, one asks, one fails
// (retried, then failed).
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import ts from 'typescript';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { backends, sleep, startService, type RunningService } from './helpers/service.js';
import { dispatch, PKG_ROOT, resultOf, startTsWorker, toolsListed, type TsWorker } from './helpers/ts-worker.js';

const OUT_DIR = join(PKG_ROOT, 'build-test', 'readme-worker');
const TOOLS = ['count', 'greet', 'fetch_quote'];

function workerBlock(markdown: string): string {
  const lines = markdown.split('\n');
  const at = lines.findIndex((l) => /^<!-- ci-ts-worker:.*-->$/.test(l.trim()));
  assert.ok(at >= 0, 'the README has a worker example marked <!-- ci-ts-worker: … -->');
  assert.equal(lines[at + 1], '```ts');
  const end = lines.indexOf('```', at + 2);
  return lines.slice(at + 2, end).join('\n');
}

function compile(file: string): void {
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    typeRoots: [join(PKG_ROOT, 'node_modules', '@types')],
    strict: true,
    skipLibCheck: true,
    outDir: OUT_DIR,
    rootDir: OUT_DIR,
  });
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
  const text = ts.formatDiagnostics(diagnostics, { getCanonicalFileName: (f) => f, getCurrentDirectory: () => PKG_ROOT, getNewLine: () => '\n' });
  assert.equal(diagnostics.length, 0, `the README's worker example does not compile:\n${text}`);
}

it("the repository README's polyglot section shows the example run here", () => {
  const repository = workerBlock(readFileSync(join(PKG_ROOT, '..', '..', 'README.md'), 'utf8'));
  assert.equal(repository, workerBlock(readFileSync(join(PKG_ROOT, 'README.md'), 'utf8')));
});

describe("the README's worker example, as written", { skip: !backends().includes('serve') && 'needs serve (RabbitMQ)' }, () => {
  let service: RunningService;
  let client: TaskStoreClient;
  let worker: TsWorker;
  before(async () => {
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(join(OUT_DIR, 'tools.ts'), workerBlock(readFileSync(join(PKG_ROOT, 'README.md'), 'utf8')));
    compile(join(OUT_DIR, 'tools.ts'));
    service = await startService('serve', { args: ['--retry-backoff-base', '100ms'], moreTools: TOOLS });
    client = new TaskStoreClient({ endpoint: service.endpoint });
    worker = await startTsWorker(service, './build-test/readme-worker/tools.js');
    await toolsListed(service.endpoint, TOOLS);
  });
  after(async () => {
    await worker?.stop();
    client?.close();
    await service?.stop();
  });

  it('count reports progress and its result', async () => {
    const task = await dispatch(client, 'count', { n: 5 });
    const seen: string[] = [];
    for await (const t of client.watchTask(task.taskId, { timeoutMs: 20_000 })) if (t.statusMessage?.startsWith('counted')) seen.push(t.statusMessage);
    assert.ok(seen.includes('counted 1 of 5') || seen.includes('counted 2 of 5'), seen.join(','));
    assert.equal((await resultOf(client, task.taskId)).text, 'counted to 5');
  });

  it('greet asks, and greets whom the answer names', async () => {
    const task = await dispatch(client, 'greet', {});
    let questions = await client.listInputRequests(task.taskId);
    for (let i = 0; questions.length === 0 && i < 100; i++) {
      await sleep(100);
      questions = await client.listInputRequests(task.taskId);
    }
    assert.equal(questions[0]?.key, 'name');
    await client.answerInputRequests(task.taskId, { name: { action: 'accept', content: { name: 'Ada' } } });
    assert.equal((await resultOf(client, task.taskId)).text, 'Hello, Ada!');
  });

  it('fetch_quote fails retryably, is retried, then fails for good', async () => {
    const task = await dispatch(client, 'fetch_quote', { symbol: 'ACME' }, { maxAttempts: 2 });
    const seen: string[] = [];
    for await (const t of client.watchTask(task.taskId, { timeoutMs: 20_000 })) if (t.statusMessage) seen.push(t.statusMessage);
    const done = await resultOf(client, task.taskId);
    assert.equal(done.status, 'failed');
    assert.equal(done.text, 'no quote for ACME after 2 attempts');
    assert.ok(seen.some((m) => m.startsWith('attempt 1 of 2 failed: upstream unavailable for ACME; retrying in')), seen.join('\n'));
  });
});
