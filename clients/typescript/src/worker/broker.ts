// Where jobs come from: RabbitMQ, under exactly the topology the service
// tells workers in its Heartbeat answer (QueueTopology): a durable direct
// exchange, and per tool a durable queue `tool_queue_prefix + tool` with the
// service's `queue_arguments` in their AMQP types (RabbitMQ refuses a
// redeclaration with other arguments, or the same value in another type),
// bound with the tool's name. Consumers take at most as many unacknowledged
// jobs as the worker has free slots: the prefetch is set to the free slots
// when they start, and they are cancelled while no slot is free.
import { connect, type Channel, type ChannelModel, type ConsumeMessage } from 'amqplib';
import type { WireQueueArgument, WireQueueTopology } from '../wire.js';
import type { Logger } from './log.js';

export type Topology = WireQueueTopology;

/** The topology a service with `--queue-prefix prefix` and `--queue-type type` announces (proto/src/jobs.rs). */
export function topologyFor(prefix: string, queueType: 'quorum' | 'classic' = 'quorum'): Topology {
  const queueArguments: WireQueueArgument[] = [{ name: 'x-queue-type', text: queueType }];
  if (queueType === 'classic') queueArguments.push({ name: 'x-queue-version', integer: 2 });
  return { exchange: `${prefix}.jobs`, toolQueuePrefix: `${prefix}.tool.`, queueArguments };
}

/** The topology as it came in a Heartbeat answer, its oneofs read. */
export function topologyFromWire(t: WireQueueTopology): Topology {
  return {
    exchange: t.exchange,
    toolQueuePrefix: t.toolQueuePrefix,
    queueArguments: (t.queueArguments ?? []).map((a) =>
      typeof a.text === 'string' && a.text !== '' ? { name: a.name, text: a.text } : { name: a.name, integer: Number(a.integer ?? 0) },
    ),
  };
}

export function sameTopology(a: Topology, b: Topology): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Queue arguments in their AMQP field types: text as a long string, integers as a signed 32-bit long int ('I'). */
export function amqpArguments(args: WireQueueArgument[]): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const a of args) out[a.name] = a.text !== undefined ? a.text : { '!': 'int', value: a.integer ?? 0 };
  return out;
}

/** A delivered job and its acknowledgements (failures are harmless: an unacknowledged job is redelivered, and claims make that safe). */
export interface Delivery {
  tool: string;
  body: Buffer;
  /** The job's W3C trace context (AMQP header `traceparent`). */
  traceparent: string | undefined;
  /** Done with it: claimed, or stale. */
  ack(): void;
  /** Back to the queue, for this or another worker. */
  requeue(): void;
  /** Dropped for good: malformed. */
  reject(): void;
}

export interface FeedOptions {
  url: string;
  /** TLS socket options for amqps:// (ca, cert, key). */
  socket: Record<string, unknown>;
  topology: Topology;
  tools: string[];
  workerId: string;
  log: Logger;
  onDelivery: (delivery: Delivery) => void;
}

export class JobFeed {
  private channel: Channel | undefined;
  private tags: string[] = [];
  private prefetch = 0;
  private wanted = 0;
  private ops: Promise<void> = Promise.resolve();
  private closing = false;
  private seq = 0;
  /** Resolves when the connection is gone: with the error when it was lost, undefined after `close()`. */
  readonly lost: Promise<Error | undefined>;
  private markLost!: (err: Error | undefined) => void;

  private constructor(
    private readonly conn: ChannelModel,
    private readonly opts: FeedOptions,
  ) {
    this.lost = new Promise((resolve) => (this.markLost = resolve));
    conn.on('error', () => {}); // 'close' follows with the error
    conn.on('close', (err?: Error) => {
      this.channel = undefined;
      this.markLost(this.closing ? undefined : (err ?? new Error('the connection to RabbitMQ closed')));
    });
  }

  /** Connects and declares the topology; consumes nothing until `want(n)`. */
  static async open(opts: FeedOptions): Promise<JobFeed> {
    const conn = await connect(opts.url, { ...opts.socket, clientProperties: { connection_name: `mcp-taskstore-worker ${opts.workerId}` } });
    const feed = new JobFeed(conn, opts);
    try {
      const channel = await conn.createChannel();
      channel.on('error', (err: Error) => opts.log.warn('RabbitMQ channel error', { error: err.message }));
      channel.on('close', () => {
        // A channel closed by the broker (e.g. a queue deleted) ends the connection's use.
        if (!feed.closing) void conn.close().catch(() => {});
      });
      const { exchange, toolQueuePrefix, queueArguments } = opts.topology;
      await channel.assertExchange(exchange, 'direct', { durable: true });
      for (const tool of opts.tools) {
        const queue = toolQueuePrefix + tool;
        await channel.assertQueue(queue, { durable: true, arguments: amqpArguments(queueArguments) });
        await channel.bindQueue(queue, exchange, tool);
      }
      feed.channel = channel;
      return feed;
    } catch (err) {
      await conn.close().catch(() => {});
      throw err;
    }
  }

  /** Consume with a prefetch of `n` (the free slots); 0 stops consuming. */
  want(n: number): Promise<void> {
    this.wanted = Math.max(0, n);
    this.ops = this.ops.then(() => this.reconcile()).catch((err: Error) => {
      this.opts.log.warn('could not change the job consumers', { error: err.message });
      void this.conn.close().catch(() => {});
    });
    return this.ops;
  }

  /** Whether consumers are in place now. */
  get consuming(): boolean {
    return this.tags.length > 0;
  }

  /** Stops consuming and closes the connection; unacknowledged jobs go back to their queues. */
  async close(): Promise<void> {
    this.closing = true;
    this.wanted = 0;
    await this.ops.catch(() => {});
    try {
      await this.conn.close();
    } catch {
      // already closed
    }
    this.markLost(undefined);
  }

  private async reconcile(): Promise<void> {
    const channel = this.channel;
    if (!channel || this.closing) return;
    const want = this.wanted;
    const consuming = this.tags.length > 0;
    // Start when slots are free; grow when they are twice the prefetch (a
    // larger prefetch only pipelines claims: acks come right after each).
    if (want > 0 && consuming && want < this.prefetch * 2) return;
    if (want === 0 && !consuming) return;
    if (consuming) {
      for (const tag of this.tags) await channel.cancel(tag);
      this.tags = [];
    }
    if (want === 0) return;
    await channel.prefetch(Math.min(want, 65535));
    this.prefetch = want;
    for (const tool of this.opts.tools) {
      const queue = this.opts.topology.toolQueuePrefix + tool;
      const consumerTag = `${this.opts.workerId}/${tool}/${this.seq++}`;
      await channel.consume(queue, (msg) => this.deliver(channel, tool, msg), { noAck: false, consumerTag });
      this.tags.push(consumerTag);
    }
  }

  private deliver(channel: Channel, tool: string, msg: ConsumeMessage | null): void {
    if (msg === null) {
      // The broker cancelled the consumer (the queue was deleted): start over.
      this.opts.log.warn('RabbitMQ cancelled a job consumer', { tool });
      void this.conn.close().catch(() => {});
      return;
    }
    const header = msg.properties.headers?.['traceparent'];
    const traceparent = typeof header === 'string' ? header : Buffer.isBuffer(header) ? header.toString('utf8') : undefined;
    const settle = (what: string, fn: () => void) => {
      try {
        fn();
      } catch (err) {
        this.opts.log.debug(`${what} failed; the job will be redelivered`, { error: (err as Error).message });
      }
    };
    this.opts.onDelivery({
      tool,
      body: msg.content,
      traceparent,
      ack: () => settle('ack', () => channel.ack(msg)),
      requeue: () => settle('requeue', () => channel.nack(msg, false, true)),
      reject: () => settle('reject', () => channel.reject(msg, false)),
    });
  }
}
