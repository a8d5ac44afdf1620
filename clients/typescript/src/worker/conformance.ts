// The conformance tools every worker implementation ships
// (docs/worker-conformance.md), for the cross-language suite:
//   node dist/worker/cli.js ./dist/worker/conformance.js --endpoint ... --amqp-url ...
// All results are CallToolResults with one text item.
import { z } from 'zod';
import { sleep } from './control.js';
import { AskError, defineTool, RetryableError } from './tool.js';

export const tools = [
  defineTool('conf_echo', { description: 'Returns its text', inputSchema: { text: z.string() } }, ({ text }) => text),

  defineTool('conf_tool_error', { description: 'Returns a result with isError: true' }, () => ({
    content: [{ type: 'text', text: 'tool error' }],
    isError: true,
  })),

  defineTool(
    'conf_retryable',
    { description: 'Fails retryably on attempts 1..fail_times, then succeeds', inputSchema: { fail_times: z.number().int() } },
    ({ fail_times }, ctx) => {
      if (ctx.attempt <= fail_times) throw new RetryableError(`failing attempt ${ctx.attempt}`);
      return `succeeded on attempt ${ctx.attempt}`;
    },
  ),

  defineTool('conf_crash', { description: 'Ends the worker process at once (a poison task)' }, () => {
    process.exit(137);
  }),

  defineTool(
    'conf_sleep',
    {
      description: 'Sleeps ms, reporting progress every step_ms; stops when cancelled',
      inputSchema: { ms: z.number().int().nonnegative(), step_ms: z.number().int().positive().default(100) },
    },
    async ({ ms, step_ms }, ctx) => {
      const until = Date.now() + ms;
      for (let i = 1; Date.now() < until; i++) {
        await sleep(Math.min(step_ms, until - Date.now()), ctx.signal);
        if (ctx.signal.aborted) return 'stopped';
        await ctx.progress(`step ${i}`);
      }
      return `slept ${ms} ms`;
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
