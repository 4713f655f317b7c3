import type { Histogram, Registry } from 'prom-client';

interface TallyHistogramConfig {
  readonly name: string;
  readonly help: string;
  /** Upper bounds, ascending; +Inf is implied. */
  readonly buckets: readonly number[];
  readonly registers: readonly Registry[];
}

/** One line of the exposition; buckets carry `exemplar: null` as prom-client's do. */
interface ExposedValue {
  readonly labels: Readonly<Record<string, string | number>>;
  readonly value: number;
  readonly metricName: string;
  readonly exemplar?: null;
}

/**
 * A histogram without labels for per-statement paths: an observation is a bucket search and three
 * additions. prom-client's Histogram allocates, validates and hashes labels on every observation,
 * microseconds per statement on a busy proxy. A registry exposes this one exactly as it would a
 * prom-client Histogram fed the same observations (the unit test holds the two equal).
 */
export class TallyHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly name: string;
  readonly help: string;
  private readonly bounds: readonly number[];
  /** Observations per bucket, not cumulative; those above every bound are only in `count`. */
  private readonly counts: Float64Array;
  private sum = 0;
  private count = 0;

  constructor(config: TallyHistogramConfig) {
    this.name = config.name;
    this.help = config.help;
    this.bounds = [...config.buckets];
    this.counts = new Float64Array(this.bounds.length);
    // A registry reads a metric through get(), reset() and the fields above: this is one, whatever the type says.
    for (const registry of config.registers) registry.registerMetric(this as unknown as Histogram);
  }

  observe(value: number): void {
    if (!Number.isFinite(value)) throw new TypeError(`Value is not a valid number: ${value}`);
    const bounds = this.bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > bounds[bucket]!) bucket++;
    if (bucket < bounds.length) this.counts[bucket]! += 1;
    this.sum += value;
    this.count += 1;
  }

  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: ExposedValue[] }> {
    const bucketName = `${this.name}_bucket`;
    let cumulative = 0;
    const values: ExposedValue[] = this.bounds.map((bound, bucket) => {
      cumulative += this.counts[bucket]!;
      return { labels: { le: bound }, value: cumulative, metricName: bucketName, exemplar: null };
    });
    values.push(
      { labels: { le: '+Inf' }, value: this.count, metricName: bucketName, exemplar: null },
      { labels: {}, value: this.sum, metricName: `${this.name}_sum` },
      { labels: {}, value: this.count, metricName: `${this.name}_count` },
    );
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
  }
}
