// Live updates: a task created from the CLI appears in the tasks list
// within 2 s without a reload; a running task's progress message and its
// end show live, in the list and on its page; the overview's counts follow
// too; live updates can be paused, visibly, and resumed.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { keys, url, launch, newContext, watch, login, createTask, waitForStatus, cli, uid, sleep } from './lib/harness.js';

let browser;
let context;
const cancelLater = [];

before(async () => {
  browser = await launch();
  context = await newContext(browser);
  await login(context, keys.a_client.key).then((p) => p.close());
});

after(async () => {
  for (const id of cancelLater) await cli(['cancel', id], keys.a_client.key);
  await context?.close();
  await browser?.close();
});

/** Opens a page, marks its window so that a reload would show, waits for the live state. */
async function openLive(path) {
  const page = await context.newPage();
  const problems = watch(page);
  let navigations = 0;
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) navigations++;
  });
  await page.goto(url(path));
  await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'live', null, { timeout: 5000 });
  await page.evaluate(() => {
    window.__notReloaded = true;
  });
  const before = navigations;
  return {
    page,
    problems,
    async assertNotReloaded() {
      assert.equal(navigations, before, 'the page was not navigated');
      assert.equal(await page.evaluate(() => window.__notReloaded), true, 'the page was not reloaded');
    },
  };
}

describe('live updates', () => {
  test('a task created from the CLI appears at the top of the tasks list within 2 s, and its progress and end show live', async () => {
    const { page, problems, assertNotReloaded } = await openLive('tasks');
    const id = uid('live');
    const started = Date.now();
    const created = createTask(keys.a_client.key, { tool: 'sleep', args: { ms: 3000 }, id });
    const row = page.locator(`#tasks tr[data-task-id="${id}"]`);
    await row.waitFor({ timeout: 2000 + 1000 }).catch(() => {
      throw new Error(`task ${id} did not appear in the list within 3 s of starting the CLI`);
    });
    const seenAfter = Date.now() - started;
    assert.equal(await created, id);
    assert.ok(seenAfter <= 2500, `the row appeared ${seenAfter} ms after the CLI started (the CLI itself included): at most 2 s after the task exists`);
    assert.equal(await page.locator('#tasks tbody tr').first().getAttribute('data-task-id'), id, 'the new task is the top row');
    assert.equal(await row.getAttribute('id'), `task-${id}`);
    assert.equal(await row.locator('a', { hasText: id }).count() + await row.locator(`a[href$="tasks/${id}"]`).count() > 0, true, 'the row links to the task');

    // sleep reports "slept 1000 of 3000 ms", "slept 2000 of 3000 ms", then completes.
    await page.waitForFunction(
      (id) => /slept \d+ of 3000 ms/.test(document.querySelector(`#tasks tr[data-task-id="${id}"] td.message`)?.textContent || ''),
      id,
      { timeout: 5000 },
    ).catch(async () => {
      throw new Error(`no progress message showed live in the row: its message cell is "${await row.locator('td.message').textContent().catch(() => '?')}"`);
    });
    assert.equal(await row.getAttribute('data-status'), 'working', 'working while it reports progress');
    assert.match(await row.locator('td.status').textContent(), /working/i, 'the status cell says working in words');
    await page.waitForFunction(
      (id) => document.querySelector(`#tasks tr[data-task-id="${id}"]`)?.dataset.status === 'completed',
      id,
      { timeout: 6000 },
    ).catch(async () => {
      throw new Error(`the row's end did not show live: data-status is ${await row.getAttribute('data-status')}`);
    });
    assert.match(await row.locator('td.status').textContent(), /completed/i, 'the status cell says completed in words');
    assert.equal((await page.locator(`#tasks tr[data-task-id="${id}"]`).count()), 1, 'updated in place: one row for the task');
    await assertNotReloaded();
    assert.deepEqual(problems, []);
  });

  test('a task\'s page shows its progress message and end live', async () => {
    const id = await createTask(keys.a_client.key, { tool: 'sleep', args: { ms: 3000 }, id: uid('live-page') });
    const { page, problems, assertNotReloaded } = await openLive(`tasks/${id}`);
    assert.match(await page.locator('h1').textContent(), new RegExp(id));
    const status = page.locator('#task dd[data-field="status"]');
    const message = page.locator('#task dd[data-field="message"]');
    await page.waitForFunction(
      () => /slept \d+ of 3000 ms/.test(document.querySelector('#task dd[data-field="message"]')?.textContent || ''),
      null,
      { timeout: 5000 },
    ).catch(async () => {
      throw new Error(`no progress message showed live: message is "${await message.textContent().catch(() => '?')}"`);
    });
    await page.waitForFunction(
      () => /completed/i.test(document.querySelector('#task dd[data-field="status"]')?.textContent || ''),
      null,
      { timeout: 6000 },
    ).catch(async () => {
      throw new Error(`the end did not show live: status is "${await status.textContent()}"`);
    });
    // The result arrives with the end, or at least is on the page after it.
    await page.waitForFunction(() => /slept 3000 ms/.test(document.querySelector('#result')?.textContent || ''), null, { timeout: 3000 })
      .catch(() => console.log('# note: the result "slept 3000 ms" did not show live in #result (only after a reload?)'));
    // The attempts' timeline follows too: the attempt no longer "still running".
    await page.waitForFunction(
      () => {
        const attempts = document.querySelector('#attempts')?.textContent || '';
        return attempts !== '' && !/still running/.test(attempts);
      },
      null,
      { timeout: 3000 },
    ).catch(async () => {
      throw new Error(`the attempts did not follow the end: "${await page.locator('#attempts').textContent().catch(() => '?')}"`);
    });
    await assertNotReloaded();
    assert.deepEqual(problems, []);
  });

  test('live updates pause with the button, visibly, and resume', async () => {
    const { page, problems, assertNotReloaded } = await openLive('tasks');
    const toggle = page.locator('#live-toggle');
    assert.equal((await toggle.textContent()).trim(), 'Pause live updates');
    await toggle.click();
    await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'paused', null, { timeout: 2000 });
    assert.equal((await toggle.textContent()).trim(), 'Resume live updates', 'the button now resumes');
    const pressed = await toggle.getAttribute('aria-pressed');
    if (pressed === null) console.log('# note: #live-toggle has no aria-pressed');

    const id = await createTask(keys.a_client.key, { tool: 'echo', args: { text: 'made while paused' }, dispatch: false, id: uid('paused') });
    cancelLater.push(id);
    await sleep(3000);
    assert.equal(await page.locator(`#tasks tr[data-task-id="${id}"]`).count(), 0, 'a task created while paused does not appear');
    assert.equal((await page.locator('#live-state').textContent()).trim(), 'paused', 'still paused');

    await toggle.click();
    await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'live', null, { timeout: 5000 });
    assert.equal((await toggle.textContent()).trim(), 'Pause live updates');
    // Resuming catches up: what changed while paused shows (or at least
    // what changes next does).
    const next = await createTask(keys.a_client.key, { tool: 'echo', args: { text: 'made after resuming' }, dispatch: false, id: uid('resumed') });
    cancelLater.push(next);
    await page.locator(`#tasks tr[data-task-id="${next}"]`).waitFor({ timeout: 3000 });
    if (await page.locator(`#tasks tr[data-task-id="${id}"]`).count() === 0) {
      console.log('# note: the task created while paused did not show after resuming (no catch-up)');
    }
    await assertNotReloaded();
    assert.deepEqual(problems, []);
  });
  test('the overview\'s counts follow the tenant\'s tasks without a reload', async () => {
    const { page, problems, assertNotReloaded } = await openLive('');
    const working = page.locator('#counts tr[data-status="working"] td.count');
    const before = +(await working.textContent());
    const id = await createTask(keys.a_client.key, { tool: 'echo', args: { text: 'counted live' }, dispatch: false, id: uid('overview') });
    cancelLater.push(id);
    await page.waitForFunction(
      (before) => +document.querySelector('#counts tr[data-status="working"] td.count')?.textContent > before,
      before,
      { timeout: 4000 },
    ).catch(async () => {
      throw new Error(`the working count stayed ${await working.textContent()} (was ${before}) 4 s after a task was created`);
    });
    await assertNotReloaded();
    assert.deepEqual(problems, []);
  });
});
