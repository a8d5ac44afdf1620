// Every page renders with no console error and no failed request, has the
// common frame (main navigation, h1, tenant, live state and its toggle),
// passes axe-core with no serious or critical violation in light and dark
// mode, and is photographed at desktop and phone width.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  keys, url, launch, newContext, watch, login, submit, screenshot, axeViolations,
  createTask, waitForStatus, cli, uid, DESKTOP, PHONE,
} from './lib/harness.js';

const NAV = ['Overview', 'Tasks', 'Needs input', 'Tools', 'Workers'];
const LIVE_STATES = ['live', 'paused', 'polling', 'offline'];

let browser;
const seeded = {};

before(async () => {
  browser = await launch();
  const key = keys.a_client.key;
  seeded.completed = await createTask(key, { tool: 'echo', args: { text: 'hello from the browser suite' } });
  seeded.failed = await createTask(key, { tool: 'fail', args: { message: 'failed on purpose by the browser suite' } });
  seeded.question = await createTask(key, { tool: 'sleep', args: { ms: 100, ask: 'May the browser suite go ahead?' } });
  seeded.stored = await createTask(key, { tool: 'echo', args: { text: 'nobody runs me' }, dispatch: false, id: uid('pages-stored') });
  seeded.session = uid('pages-session');
  await createTask(key, { tool: 'echo', args: { text: 'in a session' }, session: seeded.session });
  await waitForStatus(seeded.completed, key, 'completed');
  await waitForStatus(seeded.failed, key, 'failed');
  await waitForStatus(seeded.question, key, 'input_required');
});

after(async () => {
  for (const id of [seeded.question, seeded.stored]) if (id) await cli(['cancel', id], keys.a_client.key);
  await browser?.close();
});

/** [screenshot name, path, expected document status] */
function pages() {
  return [
    ['overview', '', 200],
    ['tasks', 'tasks', 200],
    ['tasks-filtered', 'tasks?status=completed&tool=echo', 200],
    ['task-completed', `tasks/${seeded.completed}`, 200],
    ['task-failed', `tasks/${seeded.failed}`, 200],
    ['task-question', `tasks/${seeded.question}`, 200],
    ['task-stored', `tasks/${seeded.stored}`, 200],
    ['needs-input', 'questions', 200],
    ['tools', 'tools', 200],
    ['tool-sleep', 'tools/sleep', 200],
    ['workers', 'workers', 200],
    ['sessions', 'sessions', 200],
    ['task-missing', `tasks/${uid('missing')}`, 404],
  ];
}

async function checkFrame(page, name) {
  const nav = page.locator('nav[aria-label="Main"]');
  assert.equal(await nav.count(), 1, `${name}: one <nav aria-label="Main">`);
  for (const link of NAV) {
    assert.equal(await nav.getByRole('link', { name: link, exact: true }).count(), 1, `${name}: nav link ${link}`);
  }
  assert.equal(await page.locator('h1').count(), 1, `${name}: one <h1>`);
  assert.equal((await page.locator('#tenant').textContent())?.trim(), 'a', `${name}: #tenant is a`);
  const state = page.locator('#live-state');
  assert.equal(await state.getAttribute('role'), 'status', `${name}: #live-state has role=status`);
  assert.equal(await page.locator('button#live-toggle').count(), 1, `${name}: button#live-toggle`);
  // With JavaScript on, a page with live content (the tasks, a task)
  // subscribes to /events: live within seconds. Elsewhere the state is shown
  // as it is.
  const liveContent = await page.locator('table#tasks, dl#task, #live-region').count();
  if (liveContent) {
    await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'live', null, { timeout: 5000 })
      .catch(async () => {
        throw new Error(`${name}: #live-state is "${(await state.textContent())?.trim()}", not live, 5 s after load`);
      });
  } else {
    await page.waitForTimeout(300);
    const text = (await state.textContent())?.trim();
    if (!LIVE_STATES.includes(text)) console.log(`# note: ${name}: #live-state says "${text}", none of ${LIVE_STATES.join(', ')} (the page has no live content)`);
  }
}

describe('every page, as tenant a\'s admin', () => {
  for (const viewport of [DESKTOP, PHONE]) {
    const kind = viewport === DESKTOP ? 'desktop' : 'phone';
    test(`renders cleanly at ${kind} width (${viewport.width}x${viewport.height})`, async () => {
      const context = await newContext(browser, { viewport, axe: true });
      try {
        await login(context, keys.a_admin.key);
        const failures = [];
        for (const [name, path, status] of pages()) {
          const page = await context.newPage();
          const problems = watch(page, { allowDocumentStatus: status === 404 ? [404] : [] });
          try {
            const res = await page.goto(url(path));
            assert.equal(res.status(), status, `${name}: GET ${path} answers ${status}`);
            await checkFrame(page, name);
            await screenshot(page, name);
            if (kind === 'phone') {
              const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
              if (overflow > 0) console.log(`# note: ${name} scrolls sideways by ${overflow} px at phone width`);
            }
            const violations = await axeViolations(page);
            assert.deepEqual(violations, [], `${name}: axe (light, ${kind})`);
            assert.deepEqual(problems, [], `${name}: console errors or failed requests`);
          } catch (err) {
            failures.push(`${name} (${path}): ${err.message}`);
          } finally {
            await page.close();
          }
        }
        assert.deepEqual(failures, [], `pages at ${kind} width`);
      } finally {
        await context.close();
      }
    });
  }

  test('every page has an icon: a browser asking for /favicon.ico gets no 404 (a console error)', async () => {
    // Without <link rel="icon">, Chromium fetches /favicon.ico at the
    // origin's root (not under the base path) whenever it shows a page.
    const context = await newContext(browser);
    try {
      const loginPage = await context.newPage();
      await loginPage.goto(url('login'));
      const missing = [];
      const page = await login(context, keys.a_admin.key);
      for (const [name, path] of [['login', null], ...pages()]) {
        const target = path === null ? loginPage : page;
        if (path !== null) await page.goto(url(path));
        if (await target.locator('link[rel~="icon"]').count()) continue;
        const res = await target.request.get(new URL('/favicon.ico', target.url()).href);
        if (!res.ok()) missing.push(`${name}: no <link rel="icon">, and /favicon.ico answers ${res.status()}`);
      }
      assert.deepEqual(missing, []);
    } finally {
      await context.close();
    }
  });

  test('passes axe in dark mode (prefers-color-scheme: dark)', async () => {
    const context = await newContext(browser, { axe: true, colorScheme: 'dark' });
    try {
      await login(context, keys.a_admin.key);
      const failures = [];
      for (const [name, path, status] of pages()) {
        const page = await context.newPage();
        const res = await page.goto(url(path));
        if (res.status() !== status) failures.push(`${name}: status ${res.status()}`);
        const violations = await axeViolations(page);
        if (violations.length) failures.push(`${name}: ${violations.join(' | ')}`);
        if (name === 'overview' || name === 'task-completed') await screenshot(page, `${name}-dark`);
        await page.close();
      }
      assert.deepEqual(failures, []);
    } finally {
      await context.close();
    }
  });

  test('the "cancel all matching" confirmation renders cleanly', async () => {
    const context = await newContext(browser, { axe: true });
    try {
      const page = await login(context, keys.a_admin.key);
      const problems = watch(page);
      await page.goto(url(`tasks?id=${encodeURIComponent(seeded.stored)}`));
      const link = page.getByRole('link', { name: 'Cancel all matching' });
      await submit(page, link);
      assert.equal(await page.getByRole('button', { name: /^Cancel 1 tasks?$/ }).count(), 1, 'a "Cancel 1 task(s)" button');
      await checkFrame(page, 'cancel-confirm');
      await screenshot(page, 'cancel-confirm');
      await page.setViewportSize(PHONE);
      await screenshot(page, 'cancel-confirm');
      assert.deepEqual(await axeViolations(page), []);
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });
});

describe('the login page', () => {
  test('renders cleanly, and a refused key re-renders it with an alert', async () => {
    for (const viewport of [DESKTOP, PHONE]) {
      const context = await newContext(browser, { viewport, axe: true });
      try {
        const page = await context.newPage();
        const problems = watch(page, { allowDocumentStatus: [400, 401, 403, 422] });
        const res = await page.goto(url('login'));
        assert.equal(res.status(), 200);
        const field = page.getByLabel('API key');
        assert.equal(await field.getAttribute('type'), 'password', 'the key field is a password field');
        assert.equal(await field.getAttribute('name'), 'api_key');
        assert.equal(await page.getByRole('button', { name: 'Log in' }).count(), 1);
        assert.equal(await page.locator('h1').count(), 1, 'one <h1>');
        await screenshot(page, 'login');
        assert.deepEqual(await axeViolations(page), [], 'axe on the login page');

        await field.fill('tsk_not_a_key_at_all');
        await submit(page, page.getByRole('button', { name: 'Log in' }));
        await page.locator('[role="alert"]').first().waitFor();
        assert.notEqual(new URL(page.url()).pathname, new URL(url('')).pathname, 'a refused key stays off the overview');
        assert.equal(await page.getByLabel('API key').count(), 1, 'the form is shown again');
        await screenshot(page, 'login-refused');
        assert.deepEqual(await axeViolations(page), [], 'axe on the refused login');
        assert.deepEqual(problems, []);
      } finally {
        await context.close();
      }
    }
  });

  test('a page asked for without a session leads to the login page', async () => {
    const context = await newContext(browser);
    try {
      const page = await context.newPage();
      await page.goto(url('tasks'));
      assert.equal(await page.getByLabel('API key').count(), 1, `GET tasks without a session shows the login form (at ${page.url()})`);
    } finally {
      await context.close();
    }
  });
});

describe('the tools page', () => {
  test('shows each tool\'s last hour: ends, failure rate and times', async () => {
    const context = await newContext(browser);
    try {
      const page = await login(context, keys.a_client.key);
      await page.goto(url('tools'));
      // Columns after tool, description, task support, workers, busy:
      // completed, failed, failure rate, p50, p95.
      const cells = async (tool) => (await page.locator(`#tools tr[data-tool="${tool}"] td`).allInnerTexts()).slice(5);
      const echo = await cells('echo');
      assert.ok(+echo[0] >= 2, `echo completed at least twice: ${echo}`);
      assert.equal(echo[1], '0', `echo never failed: ${echo}`);
      assert.equal(echo[2], '0.0 %');
      assert.match(echo[3], /^\d+(\.\d)? (ms|s)$/, `echo's median: ${echo}`);
      const fail = await cells('fail');
      assert.ok(+fail[1] >= 1 && fail[0] === '0' && fail[2] === '100.0 %', `fail: ${fail}`);
      await page.goto(url('tools/echo'));
      assert.ok(+(await page.locator('#activity td').first().innerText()) >= 2, 'the tool\'s own page too');
    } finally {
      await context.close();
    }
  });
});
