import { AggregatorRegistry, Registry, type MetricObjectWithValues, type MetricValue } from 'prom-client';

export type MetricsJson = MetricObjectWithValues<MetricValue<string>>[];

/**
 * The metrics of every process of `pgward serve` on one /metrics: this process's registry and the
 * others' (as getMetricsAsJSON() gives them), each with its own `role` label, so no two processes'
 * series coincide. Every series is kept as it is: the aggregators of the default metrics would
 * otherwise drop or average some of them.
 */
export class WholeRegistry extends Registry {
  constructor(
    private readonly own: Registry,
    private readonly others: () => Promise<MetricsJson[]>,
  ) {
    super();
  }

  override async metrics(): Promise<string> {
    const all = [await this.own.getMetricsAsJSON(), ...(await this.others())];
    return AggregatorRegistry.aggregate(all.map((metrics) => metrics.map((metric) => ({ ...metric, aggregator: 'sum' as const })))).metrics();
  }
}
