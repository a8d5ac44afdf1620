// Single sign-on in a real browser: the dashboard (127.0.0.1) sends the
// browser to the identity provider (localhost: another site), which sends
// it back with a code. Proves what only a browser can: the sign-on cookie
// comes back with the provider's cross-site redirect, and the session
// cookie (SameSite=Strict) is sent on the way into the dashboard.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { env, keys, url, rel, launch, newContext, watch, cli, storedTask, isSessionCookie } from './lib/harness.js';

let browser;
const cancelLater = []; // [id, key]

before(async () => {
  browser = await launch();
});

after(async () => {
  for (const [id, key] of cancelLater) await cli(['cancel', id], key);
  await browser?.close();
});

/** Logs in through the provider as `identity`, naming `tenant` when given; resolves the page. */
async function signOn(context, identity, { tenant } = {}) {
  const page = await context.newPage();
  const problems = watch(page, { allowDocumentStatus: [400, 403] });
  await page.goto(url('login'));
  if (tenant) await page.locator('#sso input[name="tenant"]').fill(tenant);
  await Promise.all([
    page.waitForURL((u) => u.href.startsWith(env.issuer), { waitUntil: 'domcontentloaded' }),
    page.getByRole('button', { name: 'Single sign-on' }).click(),
  ]);
  await page.getByLabel('Who').selectOption(identity);
  await page.getByRole('button', { name: 'Continue' }).click();
  return { page, problems };
}

describe('single sign-on', () => {
  test('the provider\'s identity lands on the overview, in its own tenant', async () => {
    const ours = await storedTask(keys.a_client.key, 'sso-a', cancelLater);
    const theirs = await storedTask(keys.b_client.key, 'sso-b', cancelLater);
    const context = await newContext(browser);
    try {
      const { page, problems } = await signOn(context, 'a client');
      await page.waitForURL(url(''), { waitUntil: 'domcontentloaded' });
      assert.equal(rel(page.url()), '', 'the overview, logged in');
      await page.goto(url('tasks'));
      await page.locator(`#tasks tr[data-task-id="${ours}"]`).waitFor();
      assert.ok(!(await page.content()).includes(theirs), 'nothing of tenant b');
      const names = (await context.cookies(env.base)).map((c) => c.name);
      assert.ok(names.some(isSessionCookie), `a session cookie (${names})`);
      assert.ok(!names.includes('taskstore_dashboard_sign_in'), 'the sign-on cookie is gone');
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });

  test('an identity of every tenant names the tenant on the login page', async () => {
    const theirs = await storedTask(keys.b_client.key, 'sso-operator', cancelLater);
    const context = await newContext(browser);
    try {
      const { page, problems } = await signOn(context, 'operator', { tenant: 'b' });
      await page.waitForURL(url(''), { waitUntil: 'domcontentloaded' });
      await page.goto(url('tasks'));
      await page.locator(`#tasks tr[data-task-id="${theirs}"]`).waitFor();
      assert.deepEqual(problems, []);
    } finally {
      await context.close();
    }
  });

  test('a worker identity is turned away with the reason, and no session', async () => {
    const context = await newContext(browser);
    try {
      const { page } = await signOn(context, 'a worker');
      await page.getByText('worker identities cannot log in').waitFor();
      const names = (await context.cookies(env.base)).map((c) => c.name);
      assert.ok(!names.some(isSessionCookie), 'no session cookie');
      await page.goto(url('tasks'));
      assert.equal(rel(page.url()), 'login', 'still logged out');
    } finally {
      await context.close();
    }
  });
});
