/**
 * The audit trail's back-pressure on the proxy. The proxy publishes each decision to the bus and
 * ingest appends it to the trail; when ingest is alive but behind (a machine whose cores the proxy,
 * its clients and the upstream keep busy can run statements faster than it can append them), the
 * proxy stops reading its clients until ingest has caught up, so the trail stays within about a
 * second of the proxy instead of the bus filling and its decisions becoming gap markers. How far
 * behind is the age of the oldest decision ingest has not acknowledged (ConsumerBacklog.oldestAgeMs),
 * not a count of messages: how many messages ingest holds in flight depends on how many proxies
 * publish and on both sides' batching, not on whether it keeps up. A consumer that is not
 * acknowledging anything (crashed, restarting, stuck on one message) exerts none: the data plane
 * keeps serving, the bus holds the decisions, and the restarted consumer is caught up under
 * back-pressure again.
 *
 * Held are the credentials that cause the backlog, not everyone: those whose recent decisions a
 * second are at least the mean of every credential's here and above a floor an agent at human or
 * tool-call pace stays under. Another agent's statements run on while a flooder waits. If ingest falls
 * further behind anyway (many moderate agents together), every client is held.
 * docs/architecture.md, "Back-pressure from the audit".
 */
import type { ConsumerBacklog } from '../src/bus/port.js';

export interface BackPressureLimits {
  /** The age of the oldest unacknowledged message at which the proxy stops reading its clients. */
  readonly highMs: number;
  /** The age at or below which it reads them again (or none pending). */
  readonly lowMs: number;
  /** A consumer that acknowledged nothing for this long, with messages pending, is not waited for. */
  readonly stallMs: number;
  /** The age at which every client is held, not only the heavy credentials'. */
  readonly allMs: number;
  /** How long a hold may last before every client is held: the held then get their turn once ingest drained. */
  readonly maxHoldMs: number;
  /** Decisions a second under which a credential is never held before everyone is. */
  readonly lightPerSecond: number;
}

export const DEFAULT_BACK_PRESSURE_LIMITS: BackPressureLimits = { highMs: 1_000, lowMs: 500, stallMs: 1_000, allMs: 2_000, maxHoldMs: 5_000, lightPerSecond: 50 };

export interface BackPressureState {
  readonly congested: boolean;
  /** Every client is held, not only the heavy credentials' (the oldest reached `allMs`, or the hold `maxHoldMs`). */
  readonly everyone: boolean;
  /** When this hold began. */
  readonly congestedAt: number;
  /** The consumer's acknowledged count at the last sample. */
  readonly acknowledged: number;
  /** When the consumer was last seen making progress (or having nothing to do). */
  readonly progressAt: number;
}

export function initialBackPressure(nowMs: number): BackPressureState {
  return { congested: false, everyone: false, congestedAt: nowMs, acknowledged: -1, progressAt: nowMs };
}

/** The state after one sample of the consumer's backlog; `undefined`: there is no consumer (yet), or it could not be read. */
export function nextBackPressure(state: BackPressureState, sample: ConsumerBacklog | undefined, nowMs: number, limits: BackPressureLimits): BackPressureState {
  if (sample === undefined) return { congested: false, everyone: false, congestedAt: nowMs, acknowledged: state.acknowledged, progressAt: nowMs };
  const progressAt = sample.acknowledged !== state.acknowledged || sample.pending === 0 ? nowMs : state.progressAt;
  const progressing = nowMs - progressAt < limits.stallMs;
  const congested = progressing && (state.congested ? sample.oldestAgeMs > limits.lowMs : sample.oldestAgeMs >= limits.highMs);
  const congestedAt = congested && state.congested ? state.congestedAt : nowMs;
  const everyone = congested && (state.everyone || sample.oldestAgeMs >= limits.allMs || nowMs - congestedAt >= limits.maxHoldMs);
  return { congested, everyone, congestedAt, acknowledged: sample.acknowledged, progressAt };
}

/**
 * The credentials to hold, by their recent decisions a second: at least the mean of every
 * credential's that made any, and at least `lightPerSecond`. One flooder among light agents is held
 * alone; agents at like rates above the floor are held together.
 */
export function heavyCredentials(rates: ReadonlyMap<string, number>, lightPerSecond: number): string[] {
  let sum = 0;
  let active = 0;
  for (const rate of rates.values()) {
    if (rate <= 0) continue;
    sum += rate;
    active += 1;
  }
  if (active === 0) return [];
  // Like rates must all count as at the mean, which a sum's rounding may put a hair above each of them.
  const bar = Math.max((sum / active) * (1 - 1e-9), lightPerSecond);
  return [...rates].filter(([, rate]) => rate > 0 && rate >= bar).map(([credentialId]) => credentialId);
}

/** The time constant of a credential's rate: it weighs about the last second. */
const RATE_TAU_MS = 1_000;

/**
 * Each credential's decisions a second, averaged over about the last second, after `elapsedMs` in
 * which `counts` were made (measured, not the sampler's nominal interval: a slow backlog read, or a
 * busy event loop, stretches it, and dividing by the nominal one would overstate every rate).
 */
export function nextRates(rates: ReadonlyMap<string, number>, counts: ReadonlyMap<string, number>, elapsedMs: number): Map<string, number> {
  const elapsed = Math.max(elapsedMs, 1);
  const kept = Math.exp(-elapsed / RATE_TAU_MS);
  const next = new Map<string, number>();
  for (const [credentialId, rate] of rates) {
    const left = rate * kept;
    // Under a hundredth of a decision a second is none: the map forgets credentials gone quiet.
    if (left >= 0.01 || counts.has(credentialId)) next.set(credentialId, left);
  }
  for (const [credentialId, count] of counts) next.set(credentialId, (next.get(credentialId) ?? 0) + ((count * 1000) / elapsed) * (1 - kept));
  return next;
}

/**
 * The credentials held after a sample, each with the rate it was held at. Within a hold they only
 * join; once it ends none is. A held credential counts at the rate it was held at (or its own, if
 * higher): held, it makes few decisions, and its falling rate would otherwise lower the mean until
 * agents far lighter than it joined. Once everyone is held, so is every key at or above the floor:
 * a client address's refused logins among them, which `everyone` alone does not hold.
 */
export function nextHeld(held: ReadonlyMap<string, number>, rates: ReadonlyMap<string, number>, congested: boolean, everyone: boolean, lightPerSecond: number): ReadonlyMap<string, number> {
  if (!congested) return held.size === 0 ? held : new Map();
  const effective = new Map(rates);
  for (const [credentialId, rate] of held) effective.set(credentialId, Math.max(rate, rates.get(credentialId) ?? 0));
  const joining = everyone ? [...effective].filter(([, rate]) => rate >= lightPerSecond).map(([key]) => key) : heavyCredentials(effective, lightPerSecond);
  let next: Map<string, number> | undefined;
  for (const credentialId of joining) {
    if (held.has(credentialId)) continue;
    next ??= new Map(held);
    next.set(credentialId, effective.get(credentialId)!);
  }
  return next ?? held;
}

/** The key under which a client address's refused logins are counted: a login refused for a credential's name must not get that credential held. */
export const addressKey = (address: string): string => `address:${address}`;

/** Who is held: what the proxy and the hosted MCP ask of the back-pressure, and tell it. */
export interface AuditHold {
  /** Whether the clients of this credential (undefined: not logged in yet) wait now. */
  holds(credentialId: string | undefined): boolean;
  /**
   * Whether connections from this address that are not logged in wait now: only while its refused
   * logins make it heavy, never merely because everyone is held (a cancel request, or another
   * address's login, runs no statement).
   */
  holdsAddress(address: string): boolean;
  /** One decision under this key was made: a credential's (a statement run or refused, a session opened or closed) or an address's (addressKey: a refused login). */
  used(key: string): void;
}

/** What a holder of the back-pressure is told; each is optional. */
export interface BackPressureObserver {
  /**
   * Who is held changed: some clients began to be held (`engaged`), more credentials or everyone
   * (`widened`), or none any more (`released`). Ask `holds` of each client.
   */
  changed?(change: 'engaged' | 'widened' | 'released', held: { readonly credentials: readonly string[]; readonly everyone: boolean }): void;
  /** After each sample: the oldest's age (undefined: not asked, or no consumer), and whether anyone is held. */
  sampled?(oldestAgeMs: number | undefined, holding: boolean): void;
  /** A sample failed (an observer threw): sampling goes on. */
  failed?(error: unknown): void;
}

/** Samples the consumer's backlog every `intervalMs` and tells its observer whom to stop or resume reading; clear() waits until a credential is not held. */
export class AuditBackPressure implements AuditHold {
  private state = initialBackPressure(performance.now());
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private stopped = false;
  /** A sample under way, if any. */
  private sampling: Promise<void> | undefined;
  private sampledAt = performance.now();
  /** Callers of clear() waiting for the hold to end (within a hold no credential stops being held). */
  private waiting: (() => void)[] = [];
  /** Decisions of each credential since the last sample, and each one's recent decisions a second. */
  private counts = new Map<string, number>();
  private rates = new Map<string, number>();
  /** The credentials held in this hold, each with its rate when it was held. */
  private held: ReadonlyMap<string, number> = new Map();

  constructor(
    private readonly backlog: () => Promise<ConsumerBacklog | undefined>,
    private readonly observer: BackPressureObserver = {},
    private readonly limits: BackPressureLimits = DEFAULT_BACK_PRESSURE_LIMITS,
    private readonly intervalMs = 50,
  ) {}

  holds(credentialId: string | undefined): boolean {
    if (!this.state.congested) return false;
    return this.state.everyone || (credentialId !== undefined && this.held.has(credentialId));
  }

  holdsAddress(address: string): boolean {
    return this.state.congested && this.held.has(addressKey(address));
  }

  used(key: string): void {
    const idle = this.idle();
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1);
    if (idle) void this.wake();
  }

  /** Resolves at once when the credential is not held, else when it no longer is (or this stops); an idle sampler samples first. */
  async clear(credentialId: string): Promise<void> {
    if (this.idle()) await this.wake();
    if (!this.holds(credentialId)) return;
    await new Promise<void>((resolve) => this.waiting.push(resolve));
  }

  start(): void {
    this.started = true;
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.state.congested) this.apply({ ...this.state, congested: false, everyone: false });
  }

  /** Nothing made here for a while (every rate forgotten) and nothing held: the backlog is not asked until a decision is made. */
  private idle(): boolean {
    return this.rates.size === 0 && this.counts.size === 0 && !this.state.congested;
  }

  /** Samples now, backlog asked, rather than at the next tick, unless a sample is under way (then waits for it). */
  private wake(): Promise<void> {
    if (!this.started || this.stopped) return Promise.resolve();
    if (this.sampling) return this.sampling;
    clearTimeout(this.timer);
    return this.sample(true);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.sample(false), this.intervalMs);
    this.timer.unref();
  }

  private sample(woken: boolean): Promise<void> {
    this.sampling = this.sampleOnce(woken)
      .catch((error: unknown) => this.observer.failed?.(error))
      .finally(() => {
        this.sampling = undefined;
        this.schedule();
      });
    return this.sampling;
  }

  private async sampleOnce(woken: boolean): Promise<void> {
    const now = performance.now();
    this.rates = nextRates(this.rates, this.counts, now - this.sampledAt);
    this.sampledAt = now;
    this.counts = new Map();
    if (!woken && this.idle()) {
      this.observer.sampled?.(undefined, false);
      return;
    }
    // A bus that cannot say (in time) exerts no back-pressure: its publishes fail too, and become gap markers.
    const sample = await this.askBacklog();
    if (this.stopped) return;
    this.apply(nextBackPressure(this.state, sample, performance.now(), this.limits));
    this.observer.sampled?.(sample?.oldestAgeMs, this.holding());
  }

  /** The backlog, or undefined when it cannot be read within the stall time (a hung control plane, say): a hold is not kept on no news. */
  private async askBacklog(): Promise<ConsumerBacklog | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => (timer = setTimeout(() => resolve(undefined), this.limits.stallMs)));
    try {
      return await Promise.race([this.backlog().catch(() => undefined), late]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Whether any client is held. */
  private holding(): boolean {
    return this.state.congested && (this.state.everyone || this.held.size > 0);
  }

  private apply(next: BackPressureState): void {
    const wasHolding = this.holding();
    const everyoneBefore = this.state.everyone;
    const heldBefore = this.held;
    this.state = next;
    this.held = nextHeld(this.held, this.rates, next.congested, next.everyone, this.limits.lightPerSecond);
    const holding = this.holding();
    if (!holding) {
      for (const resolve of this.waiting.splice(0)) resolve();
      if (wasHolding) this.observer.changed?.('released', { credentials: [], everyone: false });
      return;
    }
    const widened = this.held !== heldBefore || (next.everyone && !everyoneBefore);
    if (wasHolding && !widened) return;
    this.observer.changed?.(wasHolding ? 'widened' : 'engaged', { credentials: [...this.held.keys()], everyone: next.everyone });
  }
}
