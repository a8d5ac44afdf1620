// The READMEs' TypeScript MCP server, run as written: the block after the
// marker `<!-- ci-ts: ... -->` in README.md (the repository's) and in this
// package's README.md is type-checked and compiled with the package's
// compiler settings, started as a child process speaking MCP on stdio to a
// real SDK Client, with its tasks in a real `taskstore dev`; the client calls
// its tool as a task and gets the result, which taskstore holds. The only
// input that is not in the README is TASKSTORE_ENDPOINT (the snippet reads
// it), pointing it at this test's service.
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { startService, type RunningService } from './helpers/service.js';

// build-test/test -> package root -> repository root
const PKG_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const REPO_ROOT = resolve(PKG_ROOT, '..', '..');
// Inside the package, so that `@mcp-taskstore/client` resolves to it (a
// package may import itself by name) and the SDK from its node_modules.
const OUT_DIR = join(PKG_ROOT, 'build-test', 'readme');

const READMES = [
  { name: 'repository', path: join(REPO_ROOT, 'README.md') },
  { name: 'package', path: join(PKG_ROOT, 'README.md') },
];

/** The ts blocks that follow a `<!-- ci-ts: … -->` line, in order. */
function markedTsBlocks(markdown: string): string[] {
  const lines = markdown.split('\n');
  const blocks: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^<!-- ci-ts:.*-->$/.test(lines[i]!.trim())) continue;
    assert.equal(lines[i + 1], '```ts', `the marker on line ${i + 1} must precede a ts block`);
    const end = lines.indexOf('```', i + 2);
    assert.ok(end > 0, `the ts block after line ${i + 1} is not closed`);
    blocks.push(lines.slice(i + 2, end).join('\n'));
    i = end;
  }
  return blocks;
}

/** Type-checks and compiles `file` as the package's own sources are; the .js path. */
function compile(file: string): string {
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
  const text = ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => PKG_ROOT,
    getNewLine: () => '\n',
  });
  assert.equal(diagnostics.length, 0, `the README's snippet does not compile:\n${text}`);
  return file.replace(/\.ts$/, '.js');
}

type ToolResult = { content: Array<{ type: string; text?: string }> };

describe("the READMEs' TypeScript MCP server, as written", () => {
  let service: RunningService;
  let direct: TaskStoreClient;
  before(async () => {
    service = await startService('dev', { args: ['--embedded-workers', '0'] });
    direct = new TaskStoreClient({ endpoint: service.endpoint });
  });
  after(async () => {
    direct?.close();
    await service?.stop();
  });

  for (const readme of READMES) {
    it(`${readme.name} README: compiles, serves on stdio, runs its tool as a task kept in taskstore`, async () => {
      const blocks = markedTsBlocks(readFileSync(readme.path, 'utf8'));
      assert.equal(blocks.length, 1, `${readme.path}: one block marked <!-- ci-ts: … --> expected`);
      mkdirSync(OUT_DIR, { recursive: true });
      const source = join(OUT_DIR, `${readme.name}-readme.ts`);
      writeFileSync(source, blocks[0]!);
      const program = compile(source);

      const stderr: string[] = [];
      const transport = new StdioClientTransport({
        command: process.execPath,
        args: [program],
        env: { ...(process.env as Record<string, string>), TASKSTORE_ENDPOINT: service.endpoint },
        stderr: 'pipe',
      });
      transport.stderr?.on('data', (chunk: Buffer) => stderr.push(chunk.toString()));
      const client = new Client({ name: 'readme-test', version: '1.0.0' });
      try {
        await client.connect(transport);
        const { tools } = await client.listTools();
        assert.deepEqual(tools.map((t) => [t.name, t.execution?.taskSupport]), [['shout', 'required']]);

        let taskId = '';
        let result: ToolResult | undefined;
        const stream = client.experimental.tasks.callToolStream({ name: 'shout', arguments: { text: 'hello' } }, CallToolResultSchema, {
          task: { ttl: 60_000 },
        });
        for await (const msg of stream) {
          if (msg.type === 'taskCreated') taskId = msg.task.taskId;
          if (msg.type === 'result') result = msg.result as ToolResult;
          if (msg.type === 'error') throw msg.error;
        }
        assert.deepEqual(result?.content, [{ type: 'text', text: 'HELLO' }]);
        // The task and its result are in taskstore, not in the server's memory.
        const stored = await direct.getTaskResult<ToolResult>(taskId);
        assert.equal(stored.status, 'completed');
        assert.deepEqual(stored.result.content, [{ type: 'text', text: 'HELLO' }]);
      } catch (err) {
        throw new Error(`${(err as Error).message}\nthe server's stderr:\n${stderr.join('')}`, { cause: err });
      } finally {
        await client.close();
      }
    });
  }
});
