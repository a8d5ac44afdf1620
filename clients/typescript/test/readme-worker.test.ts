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
import { TaskStoreClient } from '@mcp-taskstore/client';
import { codeBlocks, compileTs, markedBlocks, PKG_ROOT, REPO_ROOT } from './helpers/readme.js';
import { backends, sleep, startService, type RunningService } from './helpers/service.js';
import { dispatch, resultOf, startTsWorker, toolsListed, type TsWorker } from './helpers/ts-worker.js';

const OUT_DIR = join(PKG_ROOT, 'build-test', 'readme-worker');
const TOOLS = ['count_to', 'greet', 'fetch_quote'];

function workerBlock(markdown: string): string {
  const blocks = markedBlocks(markdown, 'ci-ts-worker');
  assert.equal(blocks.length, 1, 'the README has one worker example marked <!-- ci-ts-worker: … -->');
  return blocks[0]!;
}

/** The tools the Python README's worker example (`# my_tools.py`) declares. */
function pythonExampleTools(): string[] {
  const block = codeBlocks(readFileSync(join(PKG_ROOT, '..', 'python', 'README.md'), 'utf8'), 'python').find((b) =>
    b.code.startsWith('# my_tools.py'),
  );
  assert.ok(block, "the Python README's worker example (# my_tools.py)");
  return [...block.code.matchAll(/@tools\.tool\([^)]*\)\n(?:async )?def (\w+)/g)].map((m) => m[1]!);
}

it("the Python and TypeScript READMEs' worker examples name different tools", () => {
  // Shown side by side (the repository README), run against one service:
  // one name with two input schemas would make its workers disagree.
  const typescript = [...workerBlock(readFileSync(join(PKG_ROOT, 'README.md'), 'utf8')).matchAll(/defineTool\('(\w+)'/g)].map((m) => m[1]!);
  assert.deepEqual(typescript, TOOLS);
  const python = pythonExampleTools();
  assert.deepEqual(python, ['count', 'confirm', 'flaky']);
  assert.deepEqual(typescript.filter((tool) => python.includes(tool)), []);
});

it("the repository README's polyglot section shows the example run here", () => {
  const repository = workerBlock(readFileSync(join(REPO_ROOT, 'README.md'), 'utf8'));
  assert.equal(repository, workerBlock(readFileSync(join(PKG_ROOT, 'README.md'), 'utf8')));
});

describe("the README's worker example, as written", { skip: !backends().includes('serve') && 'needs serve (RabbitMQ)' }, () => {
  let service: RunningService;
  let client: TaskStoreClient;
  let worker: TsWorker;
  before(async () => {
    mkdirSync(OUT_DIR, { recursive: true });
    writeFileSync(join(OUT_DIR, 'tools.ts'), workerBlock(readFileSync(join(PKG_ROOT, 'README.md'), 'utf8')));
    compileTs([join(OUT_DIR, 'tools.ts')], { rootDir: OUT_DIR, outDir: OUT_DIR }, "the README's worker example");
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

  it('count_to reports progress and its result', async () => {
    const task = await dispatch(client, 'count_to', { n: 5 });
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

  it("fetch_quote fails retryably, is retried, then fails for good, with its tool's attempts", async () => {
    const task = await dispatch(client, 'fetch_quote', { symbol: 'ACME' });
    const seen: string[] = [];
    for await (const t of client.watchTask(task.taskId, { timeoutMs: 20_000 })) if (t.statusMessage) seen.push(t.statusMessage);
    const done = await resultOf(client, task.taskId);
    assert.equal(done.status, 'failed');
    assert.equal(done.text, 'no quote for ACME after 4 attempts');
    for (const attempt of [1, 2, 3]) {
      const said = `attempt ${attempt} of 4 failed: upstream unavailable for ACME; retrying in`;
      assert.ok(seen.some((m) => m.startsWith(said)), seen.join('\n'));
    }
  });
});
