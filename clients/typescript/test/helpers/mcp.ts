// Runs test/fixtures/mcp-server.js as a child process and connects SDK
// clients to it over Streamable HTTP.
import { spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { stopProcess } from './service.js';

const FIXTURE = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures', 'mcp-server.js');

export interface McpServerProcess {
  url: URL;
  proc: ChildProcess;
  /** SIGKILL: no graceful shutdown, like a crash. */
  kill(): Promise<void>;
}

export function startMcpServer(taskstoreEndpoint: string): Promise<McpServerProcess> {
  const proc = spawn(process.execPath, [FIXTURE], {
    env: { ...process.env, TASKSTORE_ENDPOINT: taskstoreEndpoint },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error('MCP server fixture did not start within 20 s')), 20_000);
    proc.once('exit', (code) => fail(new Error(`MCP server fixture exited (${code}) before listening`)));
    createInterface({ input: proc.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      const { port } = JSON.parse(line) as { port: number };
      ok({ url: new URL(`http://127.0.0.1:${port}/mcp`), proc, kill: () => stopProcess(proc, 'SIGKILL') });
    });
  });
}

export async function connectClient(url: URL): Promise<{ client: Client; close(): Promise<void> }> {
  const client = new Client({ name: 'taskstore-test-client', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(url);
  await client.connect(transport);
  return { client, close: () => client.close() };
}
