// The same GrpcTaskStore keeps working across a restart of the service: the
// channel reconnects by itself and the tasks are where they were (dev on a
// SQLite file, restarted on the same port).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { GrpcTaskStore } from '@mcp-taskstore/client';
import { binary, listeningAddr, sleep, spawnLogged, stopProcess } from './helpers/service.js';

describe('service restart', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ts-restart-'));
  const start = async (listen: string) => {
    const proc = spawnLogged(binary('TASKSTORE_BIN', 'taskstore'), [
      '--log-format', 'json', 'dev', '--listen', listen, '--mcp-listen', '127.0.0.1:0', '--dashboard-listen', 'off', '--database-url', `sqlite://${join(dir, 'tasks.db')}`, '--shutdown-grace', '1s',
    ]);
    return { proc, addr: await listeningAddr(proc, 'taskstore dev') };
  };
  let running: Awaited<ReturnType<typeof start>> | undefined;
  after(async () => {
    if (running) await stopProcess(running.proc);
    rmSync(dir, { recursive: true, force: true });
  });

  it('serves the same task through the same store after the service restarts', async () => {
    running = await start('127.0.0.1:0');
    const addr = running.addr;
    const store = new GrpcTaskStore({ endpoint: `http://${running.addr}` });
    try {
      const task = await store.createTask({ ttl: 600_000 }, 1, { method: 'tools/call', params: { name: 'x' } });
      await store.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: 'kept' }] });

      await stopProcess(running.proc);
      running = undefined;
      // While the service is down, calls fail (after grpc-js's retries) instead of hanging.
      await assert.rejects(store.getTask(task.taskId), /UNAVAILABLE/);

      running = await start(addr); // same port: the store's channel points there
      // The channel is in backoff; give it a moment, then the same object works.
      let got = null;
      for (let i = 0; i < 40 && !got; i++) {
        got = await store.getTask(task.taskId).catch(() => null);
        if (!got) await sleep(250);
      }
      assert.equal(got?.status, 'completed');
      assert.deepEqual(await store.getTaskResult(task.taskId), { content: [{ type: 'text', text: 'kept' }] });
    } finally {
      store.close();
    }
  });
});
