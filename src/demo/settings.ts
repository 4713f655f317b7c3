import type { Config } from '../config.js';

export interface DemoSettings {
  /** How long a vended credential lives. */
  readonly ttlSeconds: number;
  /** At most this many unexpired demo credentials at once. */
  readonly maxCredentials: number;
  /** Vends per client address per hour. */
  readonly vendsPerAddressPerHour: number;
}

/**
 * The demo runs by default on the embedded PostgreSQL and stays off on an external state database
 * (a shared deployment gets a demo only when it asks for one with PGWARD_DEMO=on); PGWARD_DEMO=off
 * turns it off everywhere.
 */
export function demoSettings(config: Config): DemoSettings | undefined {
  const on = config.PGWARD_DEMO === undefined ? config.PGWARD_STATE_URL === undefined : config.PGWARD_DEMO === 'on';
  if (!on) return undefined;
  return { ttlSeconds: config.PGWARD_DEMO_TTL_SECONDS, maxCredentials: config.PGWARD_DEMO_MAX_CREDENTIALS, vendsPerAddressPerHour: config.PGWARD_DEMO_VENDS_PER_ADDRESS_PER_HOUR };
}
