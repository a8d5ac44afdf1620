#!/usr/bin/env node
// mcp-taskstore-worker: runs the tools of a module as a worker of a
// taskstore fleet, with taskworker's flags (`--help`). The module exports
// `tools` (defineTool(...)s, or an McpServer), else a default export or
// `server`; `module#name` picks another export; a function is called first.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createLogger, type Logger } from './log.js';
import { serveMetrics } from './metrics.js';
import { parseCli, usage, UsageError } from './options.js';
import { Worker } from './runtime.js';
import { toolsFrom } from './server-tools.js';
import type { WorkerTool } from './tool.js';

/** The exit status after a second signal (128 + SIGINT, as shells do). */
const EXIT_AT_ONCE = 130;
// dist/worker -> the package root
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** A module path as given: relative to the working directory, else to this package (`./dist/worker/conformance.js`). */
function moduleUrl(spec: string): string {
  if (spec.startsWith('.') || isAbsolute(spec)) {
    const here = resolve(spec);
    if (existsSync(here)) return pathToFileURL(here).href;
    const inPackage = resolve(PACKAGE_ROOT, spec);
    if (existsSync(inPackage)) return pathToFileURL(inPackage).href;
    throw new UsageError(`module ${spec} not found (looked in ${process.cwd()} and ${PACKAGE_ROOT})`);
  }
  if (spec.startsWith('file:')) return spec;
  // A package name: resolved from the working directory, as the user's code would.
  return pathToFileURL(createRequire(resolve('package.json')).resolve(spec)).href;
}

async function loadTools(spec: string, only: string[] | undefined): Promise<WorkerTool[]> {
  const hash = spec.lastIndexOf('#');
  const [path, name] = hash > 0 ? [spec.slice(0, hash), spec.slice(hash + 1)] : [spec, undefined];
  const mod = (await import(moduleUrl(path))) as Record<string, unknown>;
  const value = name !== undefined ? mod[name] : (mod['tools'] ?? mod['default'] ?? mod['server']);
  if (value === undefined) throw new UsageError(`${path} exports no ${name ?? '`tools`, default or `server`'}`);
  let tools = await toolsFrom(value);
  if (only) {
    const missing = only.filter((t) => !tools.some((tool) => tool.name === t));
    if (missing.length) throw new UsageError(`--tools names tools ${path} does not have: ${missing.join(', ')}`);
    tools = tools.filter((t) => only.includes(t.name));
  }
  return tools;
}

function onSignals(log: Logger, stop: () => void): void {
  let seen = 0;
  const handle = (signal: NodeJS.Signals) => {
    seen++;
    if (seen === 1) {
      log.info('shutdown requested (send it again to exit at once)', { signal });
      stop();
    } else {
      log.warn('second signal: exiting at once; work in flight is recovered through its leases', { signal });
      process.exit(EXIT_AT_ONCE);
    }
  };
  process.on('SIGTERM', handle);
  process.on('SIGINT', handle);
}

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseCli(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n\n${usage()}\n`);
    return 2;
  }
  if (parsed === 'help') {
    process.stdout.write(usage() + '\n');
    return 0;
  }
  const log = createLogger({ format: parsed.logFormat, level: parsed.logLevel });
  let worker: Worker;
  try {
    const tools = await loadTools(parsed.module, parsed.tools);
    worker = new Worker(tools, { ...parsed.worker, logger: log });
  } catch (err) {
    log.error('the worker cannot start', { error: (err as Error).message });
    return err instanceof UsageError ? 2 : 1;
  }
  onSignals(log, () => void worker.stop());
  if (parsed.metricsListen) {
    try {
      const server = await serveMetrics(parsed.metricsListen, worker.metrics, () => worker.consuming);
      server.unref();
      const addr = server.address();
      log.info('serving metrics on /metrics', { addr: typeof addr === 'object' && addr ? `${addr.address}:${addr.port}` : String(addr) });
    } catch (err) {
      log.error(`could not listen for metrics on ${parsed.metricsListen}`, { error: (err as Error).message });
      await worker.stop();
      return 1;
    }
  }
  try {
    await worker.done;
    return 0;
  } catch (err) {
    log.error('the worker stopped with an error', { error: (err as Error).message });
    return 1;
  }
}

process.exitCode = await main();
// Whatever else is pending (a tool left behind after its stop grace) does not keep the process.
process.exit();
