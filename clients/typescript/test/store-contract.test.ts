// The SDK's own InMemoryTaskStore cases, restated, run on every store: the
// SDK's InMemoryTaskStore (control) and GrpcTaskStore on each backend. Where
// the in-memory store relies on its timers or echoes the ttl verbatim, the
// case checks the documented TaskStore contract instead (README.md,
// "Contract suite vs the SDK's tests").
import assert from 'node:assert/strict';
import { after, afterEach, before, beforeEach, describe, it } from 'node:test';
import type { TaskStore } from '@modelcontextprotocol/sdk/experimental/tasks';
import type { Request, Task } from '@modelcontextprotocol/sdk/types.js';
import { backends, sleep } from './helpers/service.js';
import { grpcTarget, inMemoryTarget, type Subject } from './helpers/stores.js';

const toolCall: Request = { method: 'tools/call', params: { name: 'contract-tool' } };
const text = (t: string) => ({ content: [{ type: 'text' as const, text: t }] });

for (const target of [inMemoryTarget(), ...backends().map(grpcTarget)]) {
  describe(target.name, () => {
    before(() => target.setup());
    after(() => target.teardown());

    let subject: Subject;
    let store: TaskStore;
    let sid: string | undefined;
    let nextRequestId = 1;
    beforeEach(() => {
      subject = target.subject();
      store = subject.store;
      sid = subject.sessionId;
    });
    afterEach(() => subject.dispose());

    const create = (params: { ttl?: number | null; pollInterval?: number } = {}) =>
      store.createTask(params, nextRequestId++, toolCall, sid);
    const statusOf = async (id: string) => (await store.getTask(id, sid))?.status;

    describe('createTask', () => {
      it('starts a task in working with an id, timestamps, the ttl asked for and a poll interval', async () => {
        const before = Date.now();
        const task = await create({ ttl: 60_000 });
        assert.equal(typeof task.taskId, 'string');
        assert.ok(task.taskId.length > 0);
        assert.equal(task.status, 'working');
        assert.equal(task.ttl, 60_000);
        assert.equal(typeof task.pollInterval, 'number');
        const created = Date.parse(task.createdAt);
        assert.ok(created > 0 && Math.abs(created - before) < 60_000, `createdAt ${task.createdAt} is about now`);
        assert.equal(task.lastUpdatedAt, task.createdAt);
      });

      it('gives a task created without a ttl the store default', async () => {
        const task = await create();
        assert.equal(task.ttl, target.defaultTtl);
      });

      it('never hands out the same id twice', async () => {
        const a = await create();
        const b = await create();
        assert.notEqual(a.taskId, b.taskId);
      });
    });

    describe('getTask', () => {
      it('answers null for an id nobody created', async () => {
        assert.equal(await store.getTask('no-such-task', sid), null);
      });

      it('returns what was created, status included', async () => {
        const made = await create();
        await store.updateTaskStatus(made.taskId, 'working', undefined, sid);
        const got = await store.getTask(made.taskId, sid);
        assert.ok(got);
        assert.equal(got.taskId, made.taskId);
        assert.equal(got.status, 'working');
      });
    });

    describe('updateTaskStatus', () => {
      let id: string;
      beforeEach(async () => {
        id = (await create()).taskId;
      });

      it('leaves a fresh task in working', async () => {
        assert.equal(await statusOf(id), 'working');
      });

      for (const to of ['input_required', 'completed', 'failed', 'cancelled'] as const) {
        it(`moves working -> ${to}`, async () => {
          await store.updateTaskStatus(id, to, undefined, sid);
          assert.equal(await statusOf(id), to);
        });
      }

      it('keeps the message given with a failure', async () => {
        await store.updateTaskStatus(id, 'failed', 'the disk caught fire', sid);
        const task = await store.getTask(id, sid);
        assert.equal(task?.status, 'failed');
        assert.equal(task?.statusMessage, 'the disk caught fire');
      });

      it('rejects an update of a task that does not exist', async () => {
        await assert.rejects(store.updateTaskStatus('no-such-task', 'working', undefined, sid), /not found/i);
      });

      for (const to of ['working', 'completed', 'failed', 'cancelled'] as const) {
        it(`moves input_required -> ${to}`, async () => {
          await store.updateTaskStatus(id, 'input_required', undefined, sid);
          await store.updateTaskStatus(id, to, undefined, sid);
          assert.equal(await statusOf(id), to);
        });
      }

      for (const terminal of ['completed', 'failed', 'cancelled'] as const) {
        it(`refuses every move out of ${terminal} and leaves it ${terminal}`, async () => {
          await store.updateTaskStatus(id, terminal, undefined, sid);
          const all: Task['status'][] = ['working', 'input_required', 'completed', 'failed', 'cancelled'];
          for (const to of all.filter((s) => s !== terminal)) {
            await assert.rejects(store.updateTaskStatus(id, to, undefined, sid), Error, `${terminal} -> ${to} must fail`);
          }
          assert.equal(await statusOf(id), terminal);
        });
      }
    });

    describe('storeTaskResult', () => {
      let id: string;
      beforeEach(async () => {
        id = (await create({ ttl: 60_000 })).taskId;
      });

      it('stores a result and completes the task', async () => {
        await store.storeTaskResult(id, 'completed', text('all good'), sid);
        assert.equal(await statusOf(id), 'completed');
        assert.deepEqual(await store.getTaskResult(id, sid), text('all good'));
      });

      it('rejects a result for a task that does not exist', async () => {
        await assert.rejects(store.storeTaskResult('no-such-task', 'completed', {}, sid), /not found/i);
      });

      it('stores a failing result and fails the task', async () => {
        const failure = { ...text('it broke'), isError: true };
        await store.storeTaskResult(id, 'failed', failure, sid);
        assert.equal(await statusOf(id), 'failed');
        assert.deepEqual(await store.getTaskResult(id, sid), failure);
      });

      for (const first of ['completed', 'failed'] as const) {
        it(`keeps the first result when a second one comes after ${first}`, async () => {
          await store.storeTaskResult(id, first, text('first'), sid);
          await assert.rejects(store.storeTaskResult(id, first, text('second'), sid), Error);
          assert.deepEqual(await store.getTaskResult(id, sid), text('first'));
        });
      }

      it('rejects a result for a cancelled task', async () => {
        await store.updateTaskStatus(id, 'cancelled', undefined, sid);
        await assert.rejects(store.storeTaskResult(id, 'completed', text('too late'), sid), Error);
        assert.equal(await statusOf(id), 'cancelled');
      });

      it('accepts a result while input is required', async () => {
        await store.updateTaskStatus(id, 'input_required', undefined, sid);
        await store.storeTaskResult(id, 'completed', text('answered'), sid);
        assert.equal(await statusOf(id), 'completed');
      });
    });

    describe('getTaskResult', () => {
      it('rejects for a task that does not exist', async () => {
        await assert.rejects(store.getTaskResult('no-such-task', sid), /not found/i);
      });

      it('rejects while there is no result yet', async () => {
        const task = await create();
        await assert.rejects(store.getTaskResult(task.taskId, sid), Error);
      });

      it('returns the stored result unchanged', async () => {
        const task = await create();
        const result = { ...text('payload'), structuredContent: { n: 1, nested: { ok: true } } };
        await store.storeTaskResult(task.taskId, 'completed', result, sid);
        assert.deepEqual(await store.getTaskResult(task.taskId, sid), result);
      });
    });

    // Real time instead of fake timers: the service's clock decides expiry,
    // so the ttls are short and the margins generous.
    describe('ttl expiry', () => {
      it('forgets a task once its ttl has passed', async () => {
        const task = await create({ ttl: 800 });
        assert.ok(await store.getTask(task.taskId, sid));
        await sleep(1300);
        assert.equal(await store.getTask(task.taskId, sid), null);
      });

      it('restarts the ttl when a result is stored', async () => {
        const task = await create({ ttl: 1500 });
        await sleep(800);
        await store.storeTaskResult(task.taskId, 'completed', text('done'), sid);
        await sleep(1000); // 1.8 s after creation, 1 s after the result
        assert.ok(await store.getTask(task.taskId, sid), 'still there within ttl of the result');
        await sleep(1000);
        assert.equal(await store.getTask(task.taskId, sid), null);
      });

      it('restarts the ttl when the task becomes terminal through a status update', async () => {
        const task = await create({ ttl: 1500 });
        await sleep(800);
        await store.updateTaskStatus(task.taskId, 'completed', undefined, sid);
        await sleep(1000);
        assert.ok(await store.getTask(task.taskId, sid));
        await sleep(1000);
        assert.equal(await store.getTask(task.taskId, sid), null);
      });

      it('returns the ttl it will actually apply', async () => {
        const task = await create({ ttl: 5000 });
        // Both stores grant a modest ttl as asked; a store MAY shorten it, and
        // then the returned value is the truth (see the serve backend's max).
        assert.equal(task.ttl, 5000);
        assert.equal((await store.getTask(task.taskId, sid))?.ttl, 5000);
      });

      it('keeps a task created with ttl null (null, or the store maximum)', async () => {
        const task = await create({ ttl: null });
        assert.equal(task.ttl, target.noExpiryTtl);
        await sleep(1200);
        const again = await store.getTask(task.taskId, sid);
        assert.equal(again?.taskId, task.taskId);
        assert.equal(again?.ttl, target.noExpiryTtl);
      });

      it('expires tasks whatever their status', async () => {
        const working = await create({ ttl: 800 });
        const completed = await create({ ttl: 800 });
        await store.storeTaskResult(completed.taskId, 'completed', text('ok'), sid);
        const failed = await create({ ttl: 800 });
        await store.storeTaskResult(failed.taskId, 'failed', text('no'), sid);
        await sleep(1300);
        for (const t of [working, completed, failed]) assert.equal(await store.getTask(t.taskId, sid), null);
      });
    });

    describe('listTasks', () => {
      it('lists nothing when there is nothing', async () => {
        const page = await store.listTasks(undefined, sid);
        assert.deepEqual(page.tasks, []);
        assert.equal(page.nextCursor, undefined);
      });

      it('lists a few tasks on one page, oldest first', async () => {
        const made = [await create(), await create(), await create()];
        const page = await store.listTasks(undefined, sid);
        assert.deepEqual(page.tasks.map((t) => t.taskId), made.map((t) => t.taskId));
        assert.equal(page.nextCursor, undefined);
      });

      it('pages through more tasks than fit one page', async () => {
        const made: string[] = [];
        for (let i = 0; i < target.pageSize + 5; i++) made.push((await create()).taskId);
        const first = await store.listTasks(undefined, sid);
        assert.equal(first.tasks.length, target.pageSize);
        assert.ok(first.nextCursor);
        const second = await store.listTasks(first.nextCursor, sid);
        assert.equal(second.tasks.length, 5);
        assert.equal(second.nextCursor, undefined);
        assert.deepEqual([...first.tasks, ...second.tasks].map((t) => t.taskId), made);
      });

      it('rejects a cursor it never issued', async () => {
        await create();
        await assert.rejects(store.listTasks('not-a-cursor', sid), Error);
      });

      // The SDK's own case feeds a task id as the cursor, which only its
      // in-memory store understands; the portable part is that a cursor
      // resumes right after the page it came from.
      it('resumes after the page a cursor came from', async () => {
        const made: string[] = [];
        for (let i = 0; i < target.pageSize + 2; i++) made.push((await create()).taskId);
        const first = await store.listTasks(undefined, sid);
        const rest = await store.listTasks(first.nextCursor, sid);
        assert.deepEqual(rest.tasks.map((t) => t.taskId), made.slice(target.pageSize));
      });
    });

    describe('sessions', { skip: !target.sessions && 'the in-memory store ignores sessions' }, () => {
      it("hides one session's task from another", async () => {
        const task = await create();
        const other = `${sid}-other`;
        assert.equal(await store.getTask(task.taskId, other), null);
        await assert.rejects(store.updateTaskStatus(task.taskId, 'cancelled', undefined, other), /not found/i);
        assert.deepEqual((await store.listTasks(undefined, other)).tasks, []);
        assert.equal(await statusOf(task.taskId), 'working');
      });
    });
  });
}
