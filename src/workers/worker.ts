/**
 * A worker process of `pgward serve` (`pgward worker NAME --role ...`, forked by the supervisor):
 * the given roles on the supervisor's state database and decision bus. It beats every second, so
 * the supervisor can tell a stalled event loop; it stops when told to, on SIGTERM, or when the
 * supervisor is gone. Ctrl-C reaches the whole process group: the worker leaves it to the
 * supervisor, which stops its workers in order.
 */
import { busOver } from '../bus/channel.js';
import { fanoutOver } from '../bus/fanout-channel.js';
import type { Config } from '../config.js';
import type { PartState } from '../http/app.js';
import type { Logger } from '../logger.js';
import { serve, type Role, type Running } from '../main.js';
import { Channel } from './channel.js';
import type { StateAnswer } from './supervisor.js';
import { WholeRegistry, type MetricsJson } from './whole-registry.js';
import { BEAT_INTERVAL_MS } from './worker-process.js';

const ASK_TIMEOUT_MS = 5_000;

export async function runWorker(config: Config, logger: Logger, name: string, roles: readonly Role[]): Promise<number> {
  if (!process.send) throw new Error('pgward worker is started by `pgward serve`, not by hand');
  const channel = new Channel(process);
  try {
    const running = await serveWorker(config, logger.child({ worker: name }), name, roles, channel).catch(async (error: unknown) => {
      const told = await channel.ask('failed', (error as Error).message, ASK_TIMEOUT_MS).then(
        () => true,
        () => false,
      );
      if (!told) throw error;
      return undefined;
    });
    if (!running) return 1;
    const beat = setInterval(() => channel.tell('beat'), BEAT_INTERVAL_MS);
    channel.tell('ready', { httpUrl: running.httpUrl });
    await new Promise<void>((resolve) => {
      channel.on('stop', resolve);
      process.once('SIGTERM', resolve);
      process.once('disconnect', resolve);
    });
    clearInterval(beat);
    await running.stop();
    return 0;
  } finally {
    channel.close('the worker stopped');
    if (process.connected) process.disconnect();
  }
}

async function serveWorker(config: Config, logger: Logger, name: string, roles: readonly Role[], channel: Channel): Promise<Running> {
  const state = await channel.ask<StateAnswer>('state', undefined, ASK_TIMEOUT_MS);
  const bus = config.NATS_URL ? undefined : busOver(channel);
  const running = await serve(config, logger, new Set(roles), {
    state: { ...state, close: async () => undefined },
    ...(bus ? { bus, fanout: fanoutOver(channel) } : {}),
    http: roles.includes('api')
      ? {
          metrics: (own) => new WholeRegistry(own, () => channel.ask<MetricsJson[]>('all.metrics', name, ASK_TIMEOUT_MS)),
          health: () => channel.ask<Record<string, PartState>>('all.health', name, ASK_TIMEOUT_MS),
        }
      : false,
  });
  channel.answer('metrics', () => running.metrics.getMetricsAsJSON());
  channel.answer('health', () => running.health());
  return running;
}
