// Questions a task's tool asks (MCP input requests) through the typed
// client: listInputRequests shows them, answerInputRequests answers them, on
// each backend. The tool is the fleet's built-in `sleep` with `ask`, which
// asks an elicitation under the key `ask` and sleeps once it is accepted.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { TaskStoreClient, TaskStoreError, isFailedPrecondition, isNotFound, type StoredTask } from '@mcp-taskstore/client';
import { backends, sleep, startService, type RunningService } from './helpers/service.js';

const CASE = { timeout: 60_000 };

const askingSleep = (ms: number, ask: string) => ({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'sleep', arguments: { ms, ask } },
});

const textOf = (result: unknown) => (result as { content: Array<{ text?: string }> }).content.map((c) => c.text ?? '').join('');

for (const backend of backends()) {
  describe(`TaskStoreClient questions on taskstore ${backend}`, () => {
    let service: RunningService;
    let client: TaskStoreClient;

    before(async () => {
      service = await startService(backend);
      client = new TaskStoreClient({ endpoint: service.endpoint, timeoutMs: 10_000 });
    });
    after(async () => {
      client?.close();
      await service?.stop();
    });

    // Dispatches `sleep` asking `question` in a session of its own and
    // waits until the question is open.
    async function asked(question: string): Promise<{ task: StoredTask; sessionId: string }> {
      const sessionId = `questions-${randomUUID()}`;
      const task = await client.createTask({ sessionId, requestId: 1, request: askingSleep(10, question), dispatch: {} });
      const until = Date.now() + 30_000;
      for (;;) {
        const now = await client.getTask(task.taskId, { sessionId });
        if (now.status === 'input_required') return { task: now, sessionId };
        if (Date.now() > until) assert.fail(`task ${task.taskId} is ${now.status} (${now.statusMessage ?? ''}), never asked`);
        await sleep(100);
      }
    }

    it('lists the open question, answers it, and the tool goes on with the answer', CASE, async () => {
      const { task, sessionId } = await asked('Sleep now?');
      assert.equal(task.statusMessage, 'Sleep now?');

      const open = await client.listInputRequests(task.taskId, { sessionId });
      assert.equal(open.length, 1);
      const [question] = open;
      assert.equal(question!.key, 'ask');
      assert.equal(question!.request.method, 'elicitation/create');
      assert.equal(question!.request.params?.['message'], 'Sleep now?');
      assert.equal(typeof question!.request.params?.['requestedSchema'], 'object');
      assert.ok(Date.parse(question!.askedAt) >= Date.parse(task.createdAt));
      assert.equal(question!.answer, undefined);
      assert.equal(question!.answeredAt, undefined);

      // One answer taken, one for a key the tool never used ignored.
      const answered = await client.answerInputRequests(
        task.taskId,
        { ask: { action: 'accept', content: {} }, 'never-asked': { action: 'decline' } },
        { sessionId },
      );
      assert.deepEqual(answered.taken, ['ask']);
      assert.deepEqual(answered.ignored, ['never-asked']);
      assert.equal(answered.task.taskId, task.taskId);
      assert.equal(answered.task.status, 'working');

      const done = await client.getTaskResult(task.taskId, { sessionId, wait: true, timeoutMs: 30_000 });
      assert.equal(done.status, 'completed');
      assert.equal(textOf(done.result), 'slept 10 ms');

      // The question stays, with its answer as it was given.
      const later = await client.listInputRequests(task.taskId, { sessionId });
      assert.equal(later.length, 1);
      assert.deepEqual(later[0]!.answer, { action: 'accept', content: {} });
      assert.ok(Date.parse(later[0]!.answeredAt!) >= Date.parse(later[0]!.askedAt));
    });

    it('ignores a second answer to an answered question', CASE, async () => {
      const { task, sessionId } = await asked('Twice?');
      const first = await client.answerInputRequests(task.taskId, { ask: { action: 'decline' } }, { sessionId });
      assert.deepEqual(first.taken, ['ask']);
      try {
        const second = await client.answerInputRequests(task.taskId, { ask: { action: 'accept', content: {} } }, { sessionId });
        assert.deepEqual(second.taken, []);
        assert.deepEqual(second.ignored, ['ask']);
      } catch (err) {
        // The declined tool may have finished already: then the task ended.
        assert.ok(isFailedPrecondition(err), String(err));
      }
      const done = await client.getTaskResult(task.taskId, { sessionId, wait: true, timeoutMs: 30_000 });
      assert.equal(textOf(done.result), 'not slept: the question was declined');
      const [question] = await client.listInputRequests(task.taskId, { sessionId });
      assert.deepEqual(question!.answer, { action: 'decline' });
    });

    it("reports another session's task as NOT_FOUND, and its answer changes nothing", CASE, async () => {
      const { task, sessionId } = await asked('Mine?');
      const other = { sessionId: `${sessionId}-other` };
      await assert.rejects(client.listInputRequests(task.taskId, other), isNotFound);
      await assert.rejects(client.answerInputRequests(task.taskId, { ask: { action: 'accept', content: {} } }, other), isNotFound);
      await assert.rejects(client.listInputRequests('no-such-task'), isNotFound);

      const still = await client.listInputRequests(task.taskId, { sessionId });
      assert.equal(still[0]!.answer, undefined);
      assert.equal((await client.getTask(task.taskId, { sessionId })).status, 'input_required');
      await client.cancelTask(task.taskId, { sessionId });
    });

    it('refuses answers for a finished task with FAILED_PRECONDITION', CASE, async () => {
      const { task, sessionId } = await asked('Finish first?');
      await client.answerInputRequests(task.taskId, { ask: { action: 'accept', content: {} } }, { sessionId });
      await client.getTaskResult(task.taskId, { sessionId, wait: true, timeoutMs: 30_000 });
      await assert.rejects(
        client.answerInputRequests(task.taskId, { later: { action: 'accept', content: {} } }, { sessionId }),
        (e) => isFailedPrecondition(e) && e instanceof TaskStoreError && /AnswerInputRequests: FAILED_PRECONDITION/.test(e.message),
      );
      // A cancelled one too, with its question still open.
      const cancelled = await asked('Cancel me?');
      await client.cancelTask(cancelled.task.taskId, { sessionId: cancelled.sessionId });
      await assert.rejects(
        client.answerInputRequests(cancelled.task.taskId, { ask: { action: 'accept', content: {} } }, { sessionId: cancelled.sessionId }),
        isFailedPrecondition,
      );
    });
  });
}
