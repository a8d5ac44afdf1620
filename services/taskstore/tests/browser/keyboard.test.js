// The main flows from the keyboard alone: Tab to the key field, type the
// key, Enter; Tab to a task's link, Enter; Tab to Cancel, Enter; the live
// toggle with Space.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { keys, url, rel, launch, newContext, watch, submit, createTask, getTask, cli, uid, tabTo } from './lib/harness.js';

const key = keys.a_client.key;
let browser;
let id;

before(async () => {
  browser = await launch();
  id = await createTask(key, { tool: 'echo', args: { text: 'keyboard' }, dispatch: false, id: uid('keyboard') });
});

after(async () => {
  if (id) await cli(['cancel', id], key);
  await browser?.close();
});

describe('keyboard', () => {
  test('log in, open a task and cancel it with Tab, typing and Enter', async () => {
    const context = await newContext(browser);
    try {
      const page = await context.newPage();
      const problems = watch(page);
      await page.goto(url('login'));
      await tabTo(page, () => document.activeElement?.getAttribute('name') === 'api_key', null, 'the API key field', 20);
      await page.keyboard.type(key);
      await submit(page, null, { key: 'Enter' });
      assert.equal(rel(page.url()), '', `Enter in the key field logs in, to the overview (at ${rel(page.url())})`);

      await page.goto(url(`tasks?id=${id}`));
      await page.locator(`#tasks tr[data-task-id="${id}"]`).waitFor();
      await tabTo(
        page,
        (id) => {
          const a = document.activeElement;
          return a?.tagName === 'A' && new URL(a.href).pathname.endsWith(`/tasks/${id}`);
        },
        id,
        'the task\'s link',
      );
      await submit(page, null, { key: 'Enter' });
      assert.equal(rel(page.url()), `tasks/${id}`, 'Enter on the link opens the task');

      await tabTo(
        page,
        () => {
          const a = document.activeElement;
          return a?.tagName === 'BUTTON' || a?.type === 'submit' ? (a.textContent || a.value).trim() === 'Cancel task' : false;
        },
        null,
        'the Cancel task button',
      );
      const visible = await page.evaluate(() => {
        const s = getComputedStyle(document.activeElement);
        return s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0 || s.boxShadow !== 'none';
      });
      if (!visible) console.log('# note: the focused Cancel task button shows no outline or box-shadow');
      await submit(page, null, { key: 'Enter' });
      assert.equal((await getTask(id, key)).status, 'cancelled', 'Enter on Cancel task cancels it; the CLI agrees');
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });

  test('the live toggle works from the keyboard', async () => {
    const context = await newContext(browser);
    try {
      const page = await context.newPage();
      await page.goto(url('login'));
      await page.getByLabel('API key').fill(key);
      await submit(page, page.getByRole('button', { name: 'Log in' }));
      await page.goto(url('tasks'));
      await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'live', null, { timeout: 5000 });
      await tabTo(page, () => document.activeElement?.id === 'live-toggle', null, 'the live toggle');
      await page.keyboard.press('Space');
      await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'paused', null, { timeout: 2000 });
      await page.keyboard.press('Enter');
      await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'live', null, { timeout: 5000 });
    } finally {
      await context.close();
    }
  });
});
