// The conformance tools every worker implementation ships
// (docs/worker-conformance.md), for the cross-language suite:
//   node dist/worker/cli.js ./dist/worker/conformance.js --endpoint ... --amqp-url ...
// All results are CallToolResults with one text item.
import { z } from 'zod';
import { sleep } from './control.js';
import { AskError, BackOff, defineTool, RetryableError } from './tool.js';

// The tasks conf_back_off has backed off in this process.
const backedOff = new Set<string>();

export const tools = [
  defineTool('conf_echo', { description: 'Returns its text', inputSchema: { text: z.string() } }, ({ text }) => text),

  defineTool('conf_tool_error', { description: 'Returns a result with isError: true' }, () => ({
    content: [{ type: 'text', text: 'tool error' }],
    isError: true,
  })),

  defineTool(
    'conf_retryable',
    {
      description: 'Fails retryably on attempts 1..fail_times, then succeeds',
      inputSchema: { fail_times: z.number().int() },
      retry: { maxAttempts: 4, backoffBaseMs: 50, backoffMaxMs: 100, retryLostWorkers: false },
    },
    ({ fail_times }, ctx) => {
      if (ctx.attempt <= fail_times) throw new RetryableError(`failing attempt ${ctx.attempt}`);
      return `succeeded on attempt ${ctx.attempt}`;
    },
  ),

  defineTool(
    'conf_back_off',
    {
      description: 'Backs its tool off for wait_ms on its first run of a task, then succeeds',
      inputSchema: { wait_ms: z.number().int().nonnegative() },
    },
    ({ wait_ms }, ctx) => {
      if (!backedOff.has(ctx.taskId)) {
        backedOff.add(ctx.taskId);
        throw BackOff.after(wait_ms, 'rate limited upstream');
      }
      return 'ran after backing off';
    },
  ),

  defineTool('conf_crash', { description: 'Ends the worker process at once (a poison task)' }, () => {
    process.exit(137);
  }),

  defineTool(
    'conf_sleep',
    {
      description: 'Sleeps ms in steps of step_ms, reporting each step as it starts; stops when cancelled',
      inputSchema: { ms: z.number().int().nonnegative(), step_ms: z.number().int().positive().default(100) },
    },
    async ({ ms, step_ms }, ctx) => {
      // Progress at the start of each step (`step 1` at once); the last step sleeps what is left.
      const steps = Math.max(1, Math.ceil(ms / step_ms));
      for (let i = 1; i <= steps; i++) {
        if (ctx.signal.aborted) return 'stopped';
        await ctx.progress(`step ${i}`);
        await sleep(Math.min(step_ms, ms - (i - 1) * step_ms), ctx.signal);
      }
      if (ctx.signal.aborted) return 'stopped';
      return `slept ${ms} ms`;
    },
  ),

  defineTool(
    'conf_noop',
    {
      description:
        'Does nothing (for ms milliseconds, default 0, silently); returns the Unix time in microseconds at which it started',
      inputSchema: { n: z.number().int().optional(), ms: z.number().int().nonnegative().default(0) },
    },
    async ({ ms }, ctx) => {
      const started = String(Math.round((performance.timeOrigin + performance.now()) * 1000));
      // Silent: no progress, so that a running task costs only what the worker library costs.
      if (ms > 0) await sleep(ms, ctx.signal);
      return started;
    },
  ),

  defineTool('conf_ask', { description: 'Asks "Proceed?" and returns the answer\'s action' }, async (_args, ctx) => {
    try {
      const answer = await ctx.ask('confirm', {
        method: 'elicitation/create',
        params: { message: 'Proceed?', requestedSchema: { type: 'object', properties: {} } },
      });
      return `answered ${String(answer['action'])}`;
    } catch (err) {
      if (err instanceof AskError && err.kind === 'declined') return `answered ${String(err.answer?.['action'])}`;
      throw err;
    }
  }),
];
