// Actions, and the CLI agrees: cancel a task from its page; cancel the
// selected tasks; cancel everything a filter matches, with its count and a
// confirmation; answer a tool's question.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  keys, url, rel, launch, newContext, watch, login, submit, createTask, getTask, waitForStatus, cli, uid,
} from './lib/harness.js';

const key = keys.a_client.key;
let browser;
let context;
const cancelLater = [];

before(async () => {
  browser = await launch();
  context = await newContext(browser);
  await login(context, key).then((p) => p.close());
});

after(async () => {
  for (const id of cancelLater) await cli(['cancel', id], key);
  await context?.close();
  await browser?.close();
});

describe('actions', () => {
  test('cancel a running task from its page; the CLI agrees', async () => {
    const id = await createTask(key, { tool: 'sleep', args: { ms: 600_000 }, id: uid('cancel-one') });
    cancelLater.push(id);
    await waitForStatus(id, key, 'working');
    const page = await context.newPage();
    const problems = watch(page);
    await page.goto(url(`tasks/${id}`));
    const button = page.getByRole('button', { name: 'Cancel task' });
    assert.equal(await button.count(), 1, 'a "Cancel task" button');
    const form = button.locator('xpath=ancestor::form');
    assert.equal((await form.getAttribute('method'))?.toLowerCase(), 'post');
    assert.match(await form.getAttribute('action'), /cancel$/);
    await submit(page, button);
    await page.waitForFunction(
      () => /cancelled/i.test(document.querySelector('#task dd[data-field="status"]')?.textContent || ''),
      null,
      { timeout: 5000 },
    ).catch(async () => {
      throw new Error(`the page does not say cancelled (at ${page.url()}: status "${await page.locator('#task dd[data-field="status"]').textContent().catch(() => 'no status field')}")`);
    });
    assert.equal((await getTask(id, key)).status, 'cancelled', 'taskstore get says cancelled');
    assert.deepEqual(problems, []);
    await page.close();
  });

  test('cancel the selected tasks; the others keep running; the CLI agrees', async () => {
    const prefix = uid('bulk');
    const ids = [];
    for (const n of [1, 2, 3]) ids.push(await createTask(key, { tool: 'echo', args: { text: 'bulk' }, dispatch: false, id: `${prefix}-${n}` }));
    cancelLater.push(...ids);
    const page = await context.newPage();
    const problems = watch(page);
    await page.goto(url(`tasks?id=${prefix}`));
    for (const id of ids) await page.locator(`#tasks tr[data-task-id="${id}"]`).waitFor();
    const [first, second, third] = ids;
    for (const id of [first, second]) {
      const box = page.locator(`#tasks tr[data-task-id="${id}"] input[type="checkbox"][name="task"][value="${id}"]`);
      assert.equal(await box.count(), 1, `a checkbox name=task value=${id}`);
      assert.equal(await box.getAttribute('form'), 'bulk', 'the checkbox belongs to form#bulk');
      await box.check();
    }
    const bulk = page.locator('form#bulk');
    assert.equal((await bulk.getAttribute('method'))?.toLowerCase(), 'post');
    await submit(page, page.getByRole('button', { name: 'Cancel selected' }));
    const notice = page.locator('p.notice[role="status"]');
    await notice.waitFor({ timeout: 5000 }).catch(() => {
      throw new Error(`no <p role="status" class="notice"> after "Cancel selected" (at ${page.url()})`);
    });
    assert.match(await notice.textContent(), /2/, `the notice counts 2 tasks: "${(await notice.textContent()).trim()}"`);
    for (const id of [first, second]) assert.equal((await getTask(id, key)).status, 'cancelled', `${id} is cancelled`);
    assert.equal((await getTask(third, key)).status, 'working', `${third}, not selected, is still working`);
    assert.deepEqual(problems, []);
    await page.close();
  });

  test('"Cancel all matching" counts, confirms, and cancels what the filter matches; the CLI agrees', async () => {
    const prefix = uid('all');
    const ids = [];
    for (const n of [1, 2, 3]) ids.push(await createTask(key, { tool: 'echo', args: { text: 'all' }, dispatch: false, id: `${prefix}-${n}` }));
    const bystander = await createTask(key, { tool: 'echo', args: { text: 'not matched' }, dispatch: false, id: uid('bystander') });
    cancelLater.push(...ids, bystander);
    const page = await context.newPage();
    const problems = watch(page);
    await page.goto(url(`tasks?id=${prefix}`));
    const link = page.getByRole('link', { name: 'Cancel all matching' });
    assert.equal(await link.count(), 1, 'a "Cancel all matching" link');
    await submit(page, link);
    // The confirmation names the count, and nothing is cancelled before it.
    const confirm = page.getByRole('button', { name: /^Cancel 3 tasks$/ });
    assert.equal(await confirm.count(), 1, `a "Cancel 3 tasks" button on the confirmation (at ${rel(page.url())})`);
    for (const id of ids) assert.equal((await getTask(id, key)).status, 'working', 'nothing is cancelled before the confirmation');
    await submit(page, confirm);
    const notice = page.locator('p.notice[role="status"]');
    await notice.waitFor({ timeout: 5000 }).catch(() => {
      throw new Error(`no <p role="status" class="notice"> after confirming (at ${page.url()})`);
    });
    assert.match(await notice.textContent(), /3/, `the notice counts 3 tasks: "${(await notice.textContent()).trim()}"`);
    for (const id of ids) assert.equal((await getTask(id, key)).status, 'cancelled', `${id} is cancelled`);
    assert.equal((await getTask(bystander, key)).status, 'working', 'a task the filter does not match is untouched');
    assert.deepEqual(problems, []);
    await page.close();
  });

  test('answer a tool\'s question from the task\'s page; the task goes on and the CLI agrees', async () => {
    const question = 'May the browser suite sleep now?';
    const id = await createTask(key, { tool: 'sleep', args: { ms: 500, ask: question }, id: uid('ask') });
    cancelLater.push(id);
    await waitForStatus(id, key, 'input_required');
    const page = await context.newPage();
    const problems = watch(page);

    // Needs input lists it.
    await page.goto(url('questions'));
    await page.getByText(question).first().waitFor({ timeout: 3000 }).catch(() => {
      throw new Error('the Needs input page does not show the question');
    });
    const links = await page.$$eval('a[href]', (as) => as.map((a) => new URL(a.href).pathname));
    assert.ok(links.some((path) => path.endsWith(`/tasks/${id}`)), 'Needs input links to the task');

    await page.goto(url(`tasks/${id}`));
    const section = page.locator('section#questions');
    assert.match(await section.textContent(), new RegExp(question.replace('?', '\\?')), 'section#questions shows the question');
    const form = section.locator('form').filter({ has: page.getByRole('button', { name: 'Answer' }) });
    assert.equal(await form.count(), 1, 'one answer form, with an "Answer" button');
    // An elicitation's answer is accept, decline or cancel: pick accept
    // however the form offers it (radio, select), then Answer.
    const accept = form.locator('input[type="radio"][value="accept"]');
    if (await accept.count()) await accept.check();
    const select = form.locator('select').filter({ has: page.locator('option[value="accept"]') });
    if (await select.count()) await select.selectOption('accept');
    await submit(page, form.getByRole('button', { name: 'Answer' }));

    const done = await waitForStatus(id, key, ['completed', 'failed', 'cancelled'], 20_000);
    assert.equal(done.status, 'completed', 'the task completed once answered');
    const result = await cli(['result', id, '--json'], key);
    assert.match(result.stdout, /slept 500 ms/, 'it was accepted: the tool slept (a decline says "not slept")');
    await page.goto(url(`tasks/${id}`));
    assert.equal(await page.locator('section#questions').getByRole('button', { name: 'Answer' }).count(), 0, 'no open question is left');
    assert.deepEqual(problems, []);
    await page.close();
  });
});
