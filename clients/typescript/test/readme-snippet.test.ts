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
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { TaskStoreClient } from '@mcp-taskstore/client';
import { compileTs, markedBlocks, PKG_ROOT, REPO_ROOT } from './helpers/readme.js';
import { startService, type RunningService } from './helpers/service.js';

// Inside the package, so that `@mcp-taskstore/client` resolves to it (a
// package may import itself by name) and the SDK from its node_modules.
const OUT_DIR = join(PKG_ROOT, 'build-test', 'readme');

const READMES = [
  { name: 'repository', path: join(REPO_ROOT, 'README.md') },
  { name: 'package', path: join(PKG_ROOT, 'README.md') },
];

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
      const blocks = markedBlocks(readFileSync(readme.path, 'utf8'), 'ci-ts');
      assert.equal(blocks.length, 1, `${readme.path}: one block marked <!-- ci-ts: … --> expected`);
      mkdirSync(OUT_DIR, { recursive: true });
      const source = join(OUT_DIR, `${readme.name}-readme.ts`);
      writeFileSync(source, blocks[0]!);
      compileTs([source], { rootDir: OUT_DIR, outDir: OUT_DIR }, `the ${readme.name} README's snippet`);
      const program = source.replace(/\.ts$/, '.js');

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
