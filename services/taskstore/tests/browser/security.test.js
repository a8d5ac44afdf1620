// Who sees what: tenant B's tasks, task URLs and live events never reach
// tenant A; a client cannot delete; a viewer cannot act; a cross-site POST
// is refused; a revoked key is logged out within seconds; a worker key
// cannot log in.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import {
  env, keys, url, rel, launch, newContext, watch, login, submit, postForms, postFromPage, cookieHeader,
  createTask, getTask, waitForStatus, cli, cliOk, uid, sleep, storedTask, isSessionCookie,
} from './lib/harness.js';

const A = keys.a_client.key;
const B = keys.b_client.key;
let browser;
const cancelLater = []; // [id, key]

before(async () => {
  browser = await launch();
});

after(async () => {
  for (const [id, key] of cancelLater) await cli(['cancel', id], key);
  await browser?.close();
});

/** The visible text of the page's main content, with `id` written ID. */
async function mainText(page, id) {
  const main = (await page.locator('main').count()) ? page.locator('main') : page.locator('body');
  return (await main.innerText()).split(id).join('ID').replace(/\s+/g, ' ').trim();
}

describe('tenants', () => {
  test('tenant B\'s tasks are not in tenant A\'s list, nor found by id', async () => {
    const theirs = await storedTask(B, 'tenant-b', cancelLater);
    const ours = await storedTask(A, 'tenant-a', cancelLater);
    const context = await newContext(browser);
    try {
      const page = await login(context, A);
      await page.goto(url('tasks'));
      await page.locator(`#tasks tr[data-task-id="${ours}"]`).waitFor();
      assert.equal(await page.locator(`#tasks tr[data-task-id="${theirs}"]`).count(), 0, 'no row of tenant B');
      assert.ok(!(await page.content()).includes(theirs), 'tenant B\'s id is nowhere in the page');
      await page.goto(url(`tasks?id=${theirs}`));
      assert.equal(await page.locator('#tasks tbody tr[data-task-id]').count(), 0, 'the id filter finds nothing of tenant B');
    } finally {
      await context.close();
    }
  });

  test('tenant B\'s task URL is the same 404 as a missing task, and cannot be acted on', async () => {
    const theirs = await storedTask(B, 'tenant-b-url', cancelLater);
    const missing = uid('tenant-b-url');
    const context = await newContext(browser);
    try {
      const page = await login(context, A);
      const other = await page.goto(url(`tasks/${theirs}`));
      assert.equal(other.status(), 404, 'another tenant\'s task is 404');
      const otherText = await mainText(page, theirs);
      const none = await page.goto(url(`tasks/${missing}`));
      assert.equal(none.status(), 404, 'a missing task is 404');
      assert.equal(otherText, await mainText(page, missing), 'the same page text');

      // Forged actions on it, from A's session, same origin: not found, and
      // B's task is untouched.
      for (const action of [`tasks/${theirs}/cancel`, `tasks/${theirs}/delete`]) {
        const status = await postFromPage(page, url(action), {});
        assert.ok([403, 404].includes(status), `POST ${action} as tenant A answers 404 (or 403), not ${status}`);
      }
      const bulk = await postFromPage(page, url('tasks/cancel'), { task: theirs });
      assert.equal((await getTask(theirs, B)).status, 'working', `B's task is untouched (bulk cancel of it answered ${bulk})`);
    } finally {
      await context.close();
    }
  });

  test('tenant B\'s live events never reach tenant A\'s page nor A\'s /events stream', async () => {
    const context = await newContext(browser);
    try {
      const page = await login(context, A);
      const problems = watch(page);
      await page.goto(url('tasks'));
      await page.waitForFunction(() => document.querySelector('#live-state')?.textContent.trim() === 'live', null, { timeout: 5000 });

      // A's /events, read from Node with A's cookie, beside the page.
      const abort = new AbortController();
      const res = await fetch(url('events'), { headers: { cookie: await cookieHeader(context), accept: 'text/event-stream' }, signal: abort.signal });
      assert.equal(res.status, 200, 'GET events with A\'s cookie');
      assert.match(res.headers.get('content-type') || '', /text\/event-stream/);
      let stream = '';
      const reading = (async () => {
        const decoder = new TextDecoder();
        try {
          for await (const chunk of res.body) stream += decoder.decode(chunk, { stream: true });
        } catch { /* aborted */ }
      })();

      const theirs = await createTask(B, { tool: 'sleep', args: { ms: 1500 }, id: uid('live-b') });
      const theirsStored = await storedTask(B, 'live-b-stored', cancelLater);
      await cli(['update', theirsStored, '--status', 'working', '--message', 'progress of tenant b'], B);
      const ours = await createTask(A, { tool: 'sleep', args: { ms: 1500 }, id: uid('live-a') });
      await page.locator(`#tasks tr[data-task-id="${ours}"]`).waitFor({ timeout: 3000 });
      await waitForStatus(theirs, B, 'completed');
      await waitForStatus(ours, A, 'completed');
      await sleep(1500);
      abort.abort();
      await reading;

      const html = await page.content();
      for (const id of [theirs, theirsStored]) {
        assert.equal(await page.locator(`[data-task-id="${id}"]`).count(), 0, `no row for B's ${id}`);
        assert.ok(!html.includes(id), `B's ${id} is nowhere in A's page`);
        assert.ok(!stream.includes(id), `B's ${id} is not in A's event stream`);
      }
      assert.ok(!html.includes('progress of tenant b') && !stream.includes('progress of tenant b'), 'nor B\'s status message');
      if (!stream.includes(ours)) console.log(`# note: A's own task id is not in A's raw /events stream either (${stream.length} bytes read)`);
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });
});

/** The POST forms an admin of tenant A sees on the pages that act on `ids`. */
async function adminForms(ids) {
  const context = await newContext(browser);
  try {
    const page = await login(context, keys.a_admin.key);
    const forms = {};
    await page.goto(url(`tasks/${ids.stored}`));
    for (const f of await postForms(page)) for (const b of f.buttons) forms[b] = f;
    await page.goto(url(`tasks/${ids.question}`));
    for (const f of await postForms(page)) for (const b of f.buttons) forms[b] = f;
    await page.goto(url(`tasks?id=${ids.stored}`));
    for (const f of await postForms(page)) for (const b of f.buttons) forms[b] = f;
    await submit(page, page.getByRole('link', { name: 'Cancel all matching' }));
    for (const f of await postForms(page)) for (const b of f.buttons) forms[b.replace(/\d+/, 'N')] = f;
    await page.goto(url('tools/echo'));
    for (const f of await postForms(page)) for (const b of f.buttons) forms[b] = f;
    return forms;
  } finally {
    await context.close();
  }
}

describe('roles', () => {
  test('a client sees no delete button, and a forged delete answers 403', async () => {
    const id = await storedTask(A, 'client-delete', cancelLater);
    const forms = await adminForms({ stored: id, question: id });
    const del = forms['Delete task'];
    assert.ok(del, `an admin sees a "Delete task" button (buttons seen: ${Object.keys(forms).join(', ')})`);

    const context = await newContext(browser);
    try {
      const page = await login(context, A);
      await page.goto(url(`tasks/${id}`));
      assert.equal(await page.getByRole('button', { name: 'Cancel task' }).count(), 1, 'a client may cancel');
      assert.equal(await page.getByRole('button', { name: /delete/i }).count(), 0, 'no delete button for a client');
      const status = await postFromPage(page, del.action, del.fields);
      assert.equal(status, 403, `a client's POST to ${rel(del.action)} answers 403`);
      assert.ok(await getTask(id, A), 'the task is still there');
    } finally {
      await context.close();
    }
  });

  test('a viewer sees no action forms, and its POSTs answer 403', async () => {
    const stored = await storedTask(A, 'viewer', cancelLater);
    const question = await createTask(A, { tool: 'sleep', args: { ms: 100, ask: 'Will the viewer answer?' }, id: uid('viewer-ask') });
    cancelLater.push([question, A]);
    await waitForStatus(question, A, 'input_required');
    const forms = await adminForms({ stored, question });
    const actions = ['Cancel task', 'Delete task', 'Run again', 'Answer', 'Cancel selected', 'Cancel N tasks', 'Run as a task'];
    const missing = actions.filter((a) => !forms[a]);
    assert.deepEqual(missing, [], `an admin sees every action (seen: ${Object.keys(forms).join(', ')})`);

    const context = await newContext(browser);
    try {
      const page = await login(context, keys.a_viewer.key);
      const problems = watch(page);
      for (const path of ['', 'tasks', `tasks?id=${stored}`, `tasks/${stored}`, `tasks/${question}`, 'questions', 'tools', 'tools/echo', 'workers', 'sessions']) {
        const res = await page.goto(url(path));
        assert.equal(res.status(), 200, `a viewer may read ${path || 'the overview'}`);
        const posts = (await postForms(page)).filter((f) => f.buttons.length && !/logout$/.test(f.action));
        assert.deepEqual(posts.map((f) => `${rel(f.action)} [${f.buttons.join(', ')}]`), [], `no action form on ${path || 'the overview'}`);
        for (const name of ['Cancel task', 'Delete task', 'Run again', 'Answer', 'Cancel selected', 'Run as a task']) {
          assert.equal(await page.getByRole('button', { name }).count(), 0, `no "${name}" button on ${path || 'the overview'}`);
        }
        assert.equal(await page.getByRole('link', { name: 'Cancel all matching' }).count(), 0, `no "Cancel all matching" on ${path || 'the overview'}`);
      }
      assert.deepEqual(problems, []);

      await page.goto(url('tasks'));
      const refused = [];
      for (const name of actions) {
        const form = forms[name];
        const fields = { ...form.fields };
        if (name === 'Cancel selected') fields.task = stored;
        if ('text' in fields) fields.text = 'a viewer ran this';
        const status = await postFromPage(page, form.action, fields);
        if (status !== 403) refused.push(`${name}: POST ${rel(form.action)} answered ${status}`);
      }
      assert.deepEqual(refused, [], 'every POST of a viewer answers 403');
      assert.equal((await getTask(stored, A)).status, 'working', 'the task is untouched');
      assert.equal((await getTask(question, A)).status, 'input_required', 'the question is unanswered');
    } finally {
      await context.close();
    }
  });

  test('a worker key cannot log in', async () => {
    const context = await newContext(browser);
    try {
      const page = await context.newPage();
      await page.goto(url('login'));
      await page.getByLabel('API key').fill(keys.a_worker.key);
      await submit(page, page.getByRole('button', { name: 'Log in' }));
      await page.locator('[role="alert"]').first().waitFor({ timeout: 3000 });
      assert.ok(!(await context.cookies(env.base)).some(isSessionCookie), 'no session cookie');
      await page.goto(url('tasks'));
      assert.equal(await page.getByLabel('API key').count(), 1, 'the tasks page still asks for a key');
    } finally {
      await context.close();
    }
  });

  test('the session cookie is HttpOnly and SameSite=Strict, and never holds the key', async () => {
    const context = await newContext(browser);
    try {
      await login(context, A);
      const cookie = (await context.cookies(env.base)).find(isSessionCookie);
      assert.ok(cookie, 'a session cookie');
      assert.equal(cookie.httpOnly, true, 'HttpOnly');
      assert.equal(cookie.sameSite, 'Strict', 'SameSite=Strict');
      assert.ok(!decodeURIComponent(cookie.value).includes(A) && !decodeURIComponent(cookie.value).includes(A.split('_').pop()), 'the cookie does not hold the key');
    } finally {
      await context.close();
    }
  });

  test('a revoked key is logged out within seconds', async () => {
    const context = await newContext(browser);
    try {
      const page = await login(context, keys.a_revoked.key);
      await page.goto(url('tasks'));
      assert.equal(await page.getByLabel('API key').count(), 0, 'logged in');
      await cliOk(['keys', 'revoke', keys.a_revoked.keyId, '--database-url', env.db], '');
      const revoked = Date.now();
      let out = null;
      while (Date.now() - revoked < 15_000) {
        await sleep(1000);
        await page.goto(url('tasks'));
        if (await page.getByLabel('API key').count()) {
          out = Date.now() - revoked;
          break;
        }
      }
      assert.ok(out !== null, 'still logged in 15 s after the key was revoked');
      assert.ok(out <= 10_000, `logged out ${out} ms after the revocation (the service's revocation delay is 5 s)`);
      assert.equal(rel(page.url()).startsWith('login'), true, `the next navigation lands on the login page (at ${rel(page.url())})`);
    } finally {
      await context.close();
    }
  });
});

describe('cross-site requests', () => {
  let server;
  let port;
  before(async () => {
    server = http.createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>another site</title><h1>another site</h1>');
    });
    await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
    port = server.address().port;
  });
  after(() => server?.close());

  test('a POST carrying the session cookie but another Origin or Sec-Fetch-Site: cross-site answers 403; a same-origin one works', async () => {
    const context = await newContext(browser);
    try {
      const page = await login(context, A);
      const cookie = await cookieHeader(context);
      const target = await storedTask(A, 'cross-site', cancelLater);
      await page.goto(url(`tasks/${target}`));
      const cancel = (await postForms(page)).find((f) => f.buttons.includes('Cancel task'));
      assert.ok(cancel, 'the task page has a Cancel task form');
      const body = new URLSearchParams(cancel.fields).toString();
      const origin = new URL(env.base).origin;
      const attempts = [
        ['Origin of another site, Sec-Fetch-Site: cross-site', { origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' }],
        ['Origin of another site only', { origin: 'http://evil.example' }],
        ['Sec-Fetch-Site: cross-site only', { 'sec-fetch-site': 'cross-site' }],
        ['same site, another origin (another port)', { origin: `http://127.0.0.1:${port}`, 'sec-fetch-site': 'same-site' }],
        ['Origin: null', { origin: 'null' }],
      ];
      const wrong = [];
      for (const [what, headers] of attempts) {
        const res = await fetch(cancel.action, {
          method: 'POST',
          redirect: 'manual',
          headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', ...headers },
          body,
        });
        if (res.status !== 403) wrong.push(`${what}: ${res.status}`);
      }
      assert.deepEqual(wrong, [], 'forged POSTs answer 403');
      assert.equal((await getTask(target, A)).status, 'working', 'the task is untouched');

      // The control: the same request from the dashboard's own origin works.
      const res = await fetch(cancel.action, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin, 'sec-fetch-site': 'same-origin' },
        body,
      });
      assert.ok(res.status < 400, `a same-origin POST is accepted (answered ${res.status})`);
      assert.equal((await getTask(target, A)).status, 'cancelled', 'and cancels');
    } finally {
      await context.close();
    }
  });

  test('a page of another origin cannot cancel a task through the logged-in browser', async () => {
    const context = await newContext(browser);
    try {
      const page = await login(context, A);
      const target = await storedTask(A, 'cross-origin', cancelLater);
      await page.goto(url(`tasks/${target}`));
      const cancel = (await postForms(page)).find((f) => f.buttons.includes('Cancel task'));
      assert.ok(cancel, 'the task page has a Cancel task form');

      // 127.0.0.1 on another port is the same site (the cookie goes along)
      // but another origin; localhost is another site.
      for (const host of [`127.0.0.1:${port}`, `localhost:${port}`]) {
        const evil = await context.newPage();
        await evil.goto(`http://${host}/`);
        const seen = evil.waitForResponse((r) => r.url() === cancel.action, { timeout: 5000 }).catch(() => null);
        await evil.evaluate(({ action, fields }) => {
          fetch(action, { method: 'POST', mode: 'no-cors', credentials: 'include', body: new URLSearchParams(fields) }).catch(() => {});
        }, cancel);
        const response = await seen;
        assert.equal((await getTask(target, A)).status, 'working', `a fetch from http://${host} does not cancel (answered ${response ? response.status() : 'nothing seen'})`);
        if (host.startsWith('127.0.0.1')) assert.equal(response?.status(), 403, `the fetch from http://${host} answers 403`);

        // A form posted cross-site, as a top-level navigation.
        const nav = evil.waitForNavigation({ timeout: 5000 }).catch(() => null);
        await evil.evaluate(({ action, fields }) => {
          const form = document.createElement('form');
          form.method = 'post';
          form.action = action;
          for (const [k, v] of Object.entries(fields)) {
            const input = document.createElement('input');
            input.type = 'hidden';
            input.name = k;
            input.value = v;
            form.append(input);
          }
          document.body.append(form);
          form.submit();
        }, cancel);
        const landed = await nav;
        assert.equal((await getTask(target, A)).status, 'working', `a form posted from http://${host} does not cancel (answered ${landed ? landed.status() : 'nothing seen'})`);
        await evil.close();
      }
    } finally {
      await context.close();
    }
  });
});
