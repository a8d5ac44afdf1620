// The README's install recipe, in a project of its own: the package packed
// (`npm pack`, as the recipe's first line does after building), then the
// recipe's second line run as written in a fresh project outside this
// repository's node_modules (the tarball's path put in), with the npm cache
// of the clone (.ci/cache/npm), offline first. There, every TypeScript
// example of the README type-checks against what that project installed (one
// SDK, one zod: the newest SDK 1.x and zod 4), and the worker example,
// compiled to ./dist/tools.js, is served by the command as the README says to
// start it; SIGTERM to that process stops the worker gracefully and leaves no
// process behind, where `npx` leaves the worker running.
import assert from 'node:assert/strict';
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { codeBlocks, compileTs, markedBlocks, PKG_ROOT, REPO_ROOT } from './helpers/readme.js';
import { backends, logLine, sleep, spawnLogged, startService, type LoggedProcess, type RunningService } from './helpers/service.js';

const run = promisify(execFile);
const README = readFileSync(join(PKG_ROOT, 'README.md'), 'utf8');
// Where the recipe says the package is; the test puts the tarball it packed there.
const PLACEHOLDER = '/path/to/mcp-taskstore/clients/typescript/';

/** The recipe's two lines: the package built and packed, then installed into a project. */
function recipe(): { pack: string; install: string } {
  const blocks = markedBlocks(README, 'ci-install', 'sh');
  assert.equal(blocks.length, 1, 'the README has one install recipe marked <!-- ci-install: … -->');
  const lines = blocks[0]!.split('\n').map((l) => l.replace(/\s+#.*$/, ''));
  assert.equal(lines.length, 2, blocks[0]);
  const [pack, install] = lines as [string, string];
  assert.match(pack, /&& npm pack$/);
  const command = install.split(' && ').pop()!;
  assert.match(command, /^npm install /);
  return { pack, install: command };
}

/** The README's command that starts the worker example (continuation lines joined), as argv. */
function workerCommand(): string[] {
  const block = codeBlocks(README, 'sh').find((b) => b.code.includes('mcp-taskstore-worker ./dist/tools.js'));
  assert.ok(block, "the README shows the command that serves ./dist/tools.js");
  return block.code.replace(/\\\n\s*/g, '').trim().split(/\s+/);
}

/** argv with the value of each `--flag` in `values` replaced, and `more` appended. */
function withFlags(argv: string[], values: Record<string, string>, more: string[]): string[] {
  const out = [...argv];
  for (const [flag, value] of Object.entries(values)) {
    const at = out.indexOf(flag);
    assert.ok(at > 0, `the README's command has ${flag}`);
    out[at + 1] = value;
  }
  return [...out, ...more];
}

/** True while any process of the group `pgid` is alive. */
function groupAlive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

function exited(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null || proc.signalCode !== null) return Promise.resolve(proc.exitCode);
  return new Promise((ok) => proc.once('exit', (code) => ok(code)));
}

async function until(what: string, check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`waited ${timeoutMs} ms for ${what}`);
    await sleep(50);
  }
}

describe("the README's install recipe, in a project of its own", () => {
  const project = mkdtempSync(join(tmpdir(), 'mcp-taskstore-readme-'));
  before(async () => {
    const { install } = recipe();
    // The recipe's `npm ci` ran already (npm test builds first): pack what it built.
    const packed = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', project], { cwd: PKG_ROOT });
    const tarball = packed.stdout.trim().split('\n').pop()!;
    assert.ok(install.includes(PLACEHOLDER + tarball), `the recipe installs ${tarball}, the file npm pack writes: ${install}`);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'readme-project', private: true, type: 'module' }));
    const env = {
      ...process.env,
      npm_config_cache: join(REPO_ROOT, '.ci', 'cache', 'npm'),
      npm_config_prefer_offline: 'true',
      npm_config_audit: 'false',
      npm_config_fund: 'false',
      npm_config_update_notifier: 'false',
    };
    await run('sh', ['-c', install.replace(PLACEHOLDER + tarball, join(project, basename(tarball)))], { cwd: project, env });
  });
  after(() => rmSync(project, { recursive: true, force: true }));

  it('installs one SDK and one zod, which every TypeScript example of the README type-checks against', () => {
    const installed = (name: string) => JSON.parse(readFileSync(join(project, 'node_modules', name, 'package.json'), 'utf8')).version as string;
    assert.match(installed('zod'), /^4\./, 'the recipe installs zod 4 (the newest), where the symlinked install broke');
    assert.match(installed('@modelcontextprotocol/sdk'), /^1\./);
    const src = join(project, 'src');
    const files: string[] = [];
    codeBlocks(README, 'ts').forEach((block, i) => {
      // The worker example is compiled as the README says (./dist/tools.js);
      // each other example is a module of its own.
      const dir = block.marker === 'ci-ts-worker' ? src : join(src, `example-${i}`);
      mkdirSync(dir, { recursive: true });
      const file = join(dir, block.marker === 'ci-ts-worker' ? 'tools.ts' : 'main.ts');
      writeFileSync(file, block.code);
      files.push(file);
      if (block.code.includes("from './tools.js'")) {
        // moveToolsToFleet's example imports "your server.registerTool(...) calls".
        writeFileSync(
          join(dir, 'tools.ts'),
          "import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';\nexport function registerMyTools(_server: McpServer): void {}\n",
        );
      }
    });
    assert.ok(files.length >= 5, `${files.length} TypeScript examples found`);
    compileTs(files, { rootDir: src, outDir: join(project, 'dist') }, "the README's examples, in a project that followed the recipe,");
  });

  describe('the worker, started as the README says', { skip: !backends().includes('serve') && 'needs serve (RabbitMQ)' }, () => {
    let service: RunningService;
    const started: LoggedProcess[] = [];
    before(async () => {
      service = await startService('serve', { moreTools: ['count_to', 'greet', 'fetch_quote'] });
    });
    after(async () => {
      for (const proc of started) if (proc.pid !== undefined && groupAlive(proc.pid)) process.kill(-proc.pid, 'SIGKILL');
      await service?.stop();
    });

    /** Starts `argv` in the project, in a process group of its own; resolves once the worker consumes. */
    async function start(argv: string[]): Promise<LoggedProcess> {
      const shared = service.shared!;
      const full = withFlags(argv, { '--endpoint': service.endpoint, '--amqp-url': shared.amqpUrl }, [
        '--queue-prefix', shared.queuePrefix, '--log-format', 'json', '--shutdown-grace', '1s',
      ]);
      const proc = spawnLogged(full[0]!, full.slice(1), { cwd: project, detached: true });
      started.push(proc);
      await logLine(proc, (r) => r['message'] === 'consuming jobs from RabbitMQ', `${full.slice(0, 2).join(' ')} to consume`, 30_000);
      return proc;
    }

    it('SIGTERM to the process stops the worker gracefully, and the process tree exits', async () => {
      const argv = workerCommand();
      assert.deepEqual(argv.slice(0, 3), ['node', 'node_modules/.bin/mcp-taskstore-worker', './dist/tools.js']);
      const worker = await start(argv);
      const stopped = logLine(worker, (r) => r['message'] === 'worker stopped', 'the worker to log its stop', 15_000);
      worker.kill('SIGTERM');
      await stopped;
      assert.equal(await exited(worker), 0);
      await until('every process of the group to exit', () => !groupAlive(worker.pid!), 5_000);
    });

    it('the control: npx exits on SIGTERM and leaves the worker running', async () => {
      const argv = workerCommand();
      const npx = await start(['npx', 'mcp-taskstore-worker', ...argv.slice(2)]);
      npx.kill('SIGTERM');
      await exited(npx);
      await sleep(1000);
      assert.ok(groupAlive(npx.pid!), 'npx passed the signal on: the README need not warn against it any more');
      process.kill(-npx.pid!, 'SIGKILL');
      await until('the orphaned worker to be killed', () => !groupAlive(npx.pid!), 5_000);
    });
  });
});
