// What every browser test shares: the service `run` started (env.json), the
// CLI, Chromium, logging in, and watching a page for console errors and
// failed requests.
import { execFile } from 'node:child_process';
import { readFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { chromium } from 'playwright-core';

if (!process.env.TASKSTORE_BROWSER_ENV) {
  throw new Error('TASKSTORE_BROWSER_ENV is not set: run the suite with ./run, which starts taskstore dev');
}
/** {bin, grpc, base, db, chromium, shots, work, keys: {a_admin: {key, keyId}, …}} */
export const env = JSON.parse(readFileSync(process.env.TASKSTORE_BROWSER_ENV, 'utf8'));
export const keys = env.keys;

export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/**
 * An absolute URL of a dashboard path ('' is the overview), under the base
 * path. Behind a base path the overview is the base itself, without a
 * trailing slash (/ops, as the dashboard links it); at the root it is /.
 */
export function url(path = '') {
  const href = new URL(path.replace(/^\//, ''), env.base).href;
  return path === '' && new URL(env.base).pathname !== '/' ? href.replace(/\/$/, '') : href;
}

/** The path of a URL relative to the base, for comparisons ('' is the overview). */
export function rel(href) {
  const u = new URL(href);
  const base = new URL(env.base);
  if (`${u.pathname}/` === base.pathname) return '';
  return u.pathname.startsWith(base.pathname) ? u.pathname.slice(base.pathname.length) : u.pathname;
}

/** A fresh id, unique per run: prefix-xxxxxxxx. */
export function uid(prefix) {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

// ---------------------------------------------------------------- the CLI

/** Runs `taskstore ARGS` as the holder of `key`; resolves {code, stdout, stderr}. */
export function cli(args, key, { timeout = 30_000 } = {}) {
  return new Promise((resolve) => {
    execFile(
      env.bin,
      args,
      {
        timeout,
        env: { ...process.env, TASKSTORE_ENDPOINT: env.grpc, TASKSTORE_TOKEN: key, NO_COLOR: '1' },
      },
      (error, stdout, stderr) => {
        resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
      },
    );
  });
}

/** Like cli, but throws unless it exits 0. */
export async function cliOk(args, key, options) {
  const out = await cli(args, key, options);
  if (out.code !== 0) {
    throw new Error(`taskstore ${args.join(' ')} exited ${out.code}: ${out.stderr.trim()}`);
  }
  return out;
}

/**
 * Creates a task from the CLI; `dispatch` runs it on the embedded workers.
 * Returns its id (`id` chooses it; `session` creates it in that session).
 */
/**
 * A stored task nobody runs (working until cancelled) of `key`'s tenant,
 * its id prefixed `prefix`; [id, key] is added to `cancelLater` for the
 * test file's `after` to cancel.
 */
export async function storedTask(key, prefix, cancelLater) {
  const id = await createTask(key, { tool: 'echo', args: { text: prefix }, dispatch: false, id: uid(prefix) });
  cancelLater.push([id, key]);
  return id;
}

export async function createTask(key, { tool = 'sleep', args = { ms: 60_000 }, dispatch = true, id, ttl, session } = {}) {
  const argv = ['create', '--tool', tool, '--arguments', JSON.stringify(args), '--json'];
  if (session) argv.push('--session', session);
  if (dispatch) argv.push('--dispatch');
  if (id) argv.push('--task-id', id);
  if (ttl) argv.push('--ttl', ttl);
  const { stdout } = await cliOk(argv, key);
  return JSON.parse(stdout.trim().split('\n').pop()).taskId;
}

/** `taskstore get ID --json` as the holder of `key`: the task, or null when it is not found (exit 5). */
export async function getTask(id, key) {
  const out = await cli(['get', id, '--json'], key);
  if (out.code === 5) return null;
  if (out.code !== 0) throw new Error(`taskstore get ${id} exited ${out.code}: ${out.stderr.trim()}`);
  return JSON.parse(out.stdout.trim().split('\n').pop());
}

/** Polls the CLI until the task's status is one of `statuses`; returns the task. */
export async function waitForStatus(id, key, statuses, timeoutMs = 15_000) {
  const wanted = [].concat(statuses);
  const deadline = Date.now() + timeoutMs;
  let task;
  while (Date.now() < deadline) {
    task = await getTask(id, key);
    if (task && wanted.includes(task.status)) return task;
    await sleep(200);
  }
  throw new Error(`task ${id} is ${task ? task.status : 'not found'} after ${timeoutMs} ms, not ${wanted.join(' or ')}`);
}

export const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));

// ---------------------------------------------------------------- Chromium

export function launch() {
  return chromium.launch({
    executablePath: env.chromium,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

const require = createRequire(import.meta.url);
export const AXE_SOURCE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');

/**
 * A browser context (its own cookies). `axe: true` injects axe-core into
 * every page before its own scripts (an init script, which the page's CSP
 * does not govern).
 */
export async function newContext(browser, { viewport = DESKTOP, axe = false, colorScheme = 'light', javaScriptEnabled = true } = {}) {
  const context = await browser.newContext({ viewport, colorScheme, javaScriptEnabled });
  context.setDefaultTimeout(10_000);
  if (axe) await context.addInitScript({ content: AXE_SOURCE });
  return context;
}

/**
 * Collects what must not happen on a page: console errors (CSP violations
 * included), uncaught exceptions, failed requests, responses >= 400 (but
 * `allow` statuses of the document itself, e.g. a 404 page). The live
 * stream being aborted by a navigation is not a failure.
 */
export function watch(page, { allowDocumentStatus = [] } = {}) {
  const problems = [];
  page.on('console', (msg) => {
    if (msg.type() !== 'error') return;
    const where = msg.location().url || '';
    // Chromium logs a document's 4xx too: no error when that status is the expected one.
    const logged = /^Failed to load resource: the server responded with a status of (\d+)/.exec(msg.text());
    if (logged && allowDocumentStatus.includes(+logged[1]) && where === page.url()) return;
    problems.push(`console error: ${msg.text()} (${where || 'no url'})`);
  });
  page.on('pageerror', (err) => problems.push(`uncaught: ${err.message}`));
  page.on('requestfailed', (req) => {
    const failure = req.failure()?.errorText || 'failed';
    // The dashboard's script never aborts its own requests: an aborted event
    // stream or refresh means the page was left (a test's next goto) while it
    // was in flight, not that the server failed one.
    const ownRequest = ['eventsource', 'fetch'].includes(req.resourceType()) || /\/events(\?|$)/.test(req.url());
    if (failure.includes('ERR_ABORTED') && ownRequest) return;
    problems.push(`request failed: ${req.method()} ${req.url()} ${failure}`);
  });
  page.on('response', (res) => {
    const req = res.request();
    if (res.status() < 400) return;
    if (req.resourceType() === 'document' && allowDocumentStatus.includes(res.status())) return;
    problems.push(`HTTP ${res.status()}: ${req.method()} ${res.url()}`);
  });
  return problems;
}

/** Logs in with an API key through the form; resolves the page, on the overview. */
export async function login(context, key) {
  const page = await context.newPage();
  await page.goto(url('login'));
  await page.getByLabel('API key').fill(key);
  await Promise.all([page.waitForURL(url(''), { waitUntil: 'domcontentloaded' }), page.getByRole('button', { name: 'Log in' }).click()]);
  return page;
}

/** The session cookie's names: `__Host-` prefixed where the dashboard
 * serves secure cookies at the root path, as here; plain elsewhere. */
export const SESSION_COOKIES = ['__Host-taskstore_dashboard', 'taskstore_dashboard'];
export const isSessionCookie = (cookie) => SESSION_COOKIES.includes(cookie.name ?? cookie);

/** The session cookie of a logged-in context, as a Cookie header. */
export async function cookieHeader(context) {
  const cookies = await context.cookies(env.base);
  const session = cookies.find(isSessionCookie);
  if (!session) throw new Error(`no session cookie; cookies: ${cookies.map((c) => c.name).join(', ') || 'none'}`);
  return `${session.name}=${session.value}`;
}

/**
 * The POST forms of the page: [{id, action (absolute), fields: {name:
 * value} as the form would send them now (hidden ones, a CSRF token if any,
 * included), buttons: [names]}].
 */
export function postForms(page) {
  return page.$$eval('form', (forms) =>
    forms
      .filter((f) => (f.getAttribute('method') || 'get').toLowerCase() === 'post')
      .map((f) => ({
        // getAttribute: a field named "action" or "id" shadows the properties
        id: f.getAttribute('id'),
        action: new URL(f.getAttribute('action') || '', document.baseURI).href,
        fields: Object.fromEntries(
          [...f.elements]
            .filter((e) => e.name && !['submit', 'button', 'reset'].includes(e.type) && (!['checkbox', 'radio'].includes(e.type) || e.checked))
            .map((e) => [e.name, e.value]),
        ),
        buttons: [...f.querySelectorAll('button, input[type=submit]')].map((b) => (b.textContent || b.value || '').trim()),
      })),
  );
}

/**
 * POSTs from inside the page (same origin, the page's cookie) and resolves
 * the status; redirects are not followed (any redirect resolves 303), a
 * network error resolves a string saying so.
 */
export function postFromPage(page, action, fields) {
  return page.evaluate(
    async ({ action, fields }) => {
      const body = new URLSearchParams();
      for (const [k, v] of Object.entries(fields)) for (const one of [].concat(v)) body.append(k, one);
      try {
        const res = await fetch(action, { method: 'POST', body, redirect: 'manual', credentials: 'same-origin' });
        return res.type === 'opaqueredirect' ? 303 : res.status;
      } catch (err) {
        return `no answer (${err.message})`;
      }
    },
    { action, fields },
  );
}

/** Saves a full-page screenshot as target/browser-screenshots/NAME-WIDTH.png. */
export async function screenshot(page, name) {
  mkdirSync(env.shots, { recursive: true });
  const { width } = page.viewportSize();
  const kind = width >= 1000 ? 'desktop' : 'phone';
  await page.screenshot({ path: `${env.shots}/${name}-${kind}.png`, fullPage: true });
}

/** axe-core's serious and critical violations on the page, one line each. */
export async function axeViolations(page) {
  const results = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.slice(0, 3).map((n) => n.target.join(' ')),
    }));
  });
  return results
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.targets.join('; ')})`);
}

/**
 * Presses Tab until `predicate(arg)` (run in the page; it looks at
 * document.activeElement) holds; at most `max` presses. Resolves the count.
 */
export async function tabTo(page, predicate, arg, description, max = 150) {
  // Already there (e.g. an autofocus field): no Tab needed.
  if (await page.evaluate(predicate, arg)) return 0;
  for (let i = 0; i < max; i++) {
    await page.keyboard.press('Tab');
    const hit = await page.evaluate(predicate, arg);
    if (hit) return i + 1;
  }
  throw new Error(`${description} was not reached with ${max} presses of Tab`);
}

/**
 * Clicks (or presses Enter on) something that submits a form or follows a
 * link, and waits for the page it leads to (if the page's script handles
 * it without navigating, for a moment).
 */
export async function submit(page, locator, { key } = {}) {
  const navigated = page.waitForNavigation({ timeout: 5000, waitUntil: 'domcontentloaded' }).catch(() => null);
  if (key) await page.keyboard.press(key);
  else await locator.click();
  await navigated;
}
