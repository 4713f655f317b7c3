/**
 * What pgward exposes and what its operators are given to watch it agree (issue 18 item 6): the
 * metrics table of docs/operations.md lists exactly the pgward metrics a running `pgward serve`
 * (the embedded default, every process) serves on /metrics, with their types; and every PromQL
 * expression of ops/prometheus/alerts.yml and ops/grafana/pgward.json parses with the Prometheus
 * project's grammar and names only metrics that /metrics serves.
 */
import { readFile } from 'node:fs/promises';
import type { SyntaxNode } from '@lezer/common';
import { parser } from '@prometheus-io/lezer-promql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startServe, type ServedPgward } from '../support/serve-fixture.js';

/** Made by Prometheus for every target it scrapes, not by the target. */
const PROMETHEUS_MADE = new Set(['up']);
/** PromQL functions whose argument must be a counter (or a histogram's buckets, sum or count). */
const COUNTER_FUNCTIONS = new Set(['Rate', 'Increase', 'Irate']);

let pgward: ServedPgward | undefined;
/** Metric families on /metrics: name → type. */
let served: Map<string, string>;

beforeAll(async () => {
  pgward = await startServe({ label: 'metrics' });
  const exposition = await fetch(`${pgward.server.httpUrl}/metrics`).then((response) => response.text());
  served = new Map([...exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map(([, name, type]) => [name!, type!]));
}, 180_000);

afterAll(async () => {
  await pgward?.stop();
});

/** The rows of the metrics table in docs/operations.md: name → type. */
async function documented(): Promise<Map<string, string>> {
  const doc = await readFile('docs/operations.md', 'utf8');
  const section = doc.slice(doc.indexOf('## Metrics'), doc.indexOf('\n## ', doc.indexOf('## Metrics') + 1));
  return new Map([...section.matchAll(/^\| `(\w+)` \| (\w+) \|/gm)].map(([, name, type]) => [name!, type!]));
}

/** The type of a series name as /metrics serves it: a family, or a histogram's `_bucket`, `_sum` or `_count` (counters all three). */
function seriesType(name: string): string | undefined {
  const family = served.get(name);
  if (family) return family;
  const part = /^(\w+)_(bucket|sum|count)$/.exec(name);
  const base = part && served.get(part[1]!);
  return base === 'histogram' || (base === 'summary' && part![2] !== 'bucket') ? 'counter' : undefined;
}

/** What is wrong with one PromQL expression: syntax errors, unknown metrics, rates of what is not a counter. */
function promqlProblems(expr: string): string[] {
  const problems: string[] = [];
  const tree = parser.parse(expr);
  const selected = (node: SyntaxNode): string => expr.slice(node.from, node.to);
  tree.iterate({
    enter(ref) {
      if (ref.type.isError) problems.push(`syntax error at ${ref.from}: ${JSON.stringify(expr.slice(Math.max(0, ref.from - 20), ref.to + 20))}`);
      if (ref.name === 'Identifier' && ref.node.parent?.name === 'VectorSelector') {
        const name = selected(ref.node);
        if (!PROMETHEUS_MADE.has(name) && !seriesType(name)) problems.push(`${name} is not on /metrics`);
      }
      if (ref.name === 'FunctionIdentifier' && COUNTER_FUNCTIONS.has(ref.node.firstChild?.name ?? '')) {
        const body = ref.node.nextSibling;
        body?.toTree().iterate({
          enter(inner) {
            if (inner.name !== 'Identifier') return;
            const name = expr.slice(body.from + inner.from, body.from + inner.to);
            const type = seriesType(name);
            if (type && type !== 'counter') problems.push(`${selected(ref.node)}() of ${name}, a ${type}`);
          },
        });
      }
    },
  });
  return problems;
}

describe('the metrics pgward serves', () => {
  it('are exactly those docs/operations.md lists, with their types', async () => {
    const own = new Map([...served].filter(([name]) => name.startsWith('pgward_')));
    expect(own.size).toBeGreaterThanOrEqual(27);
    expect(Object.fromEntries([...(await documented())].sort())).toEqual(Object.fromEntries([...own].sort()));
  });

  it('are otherwise only prom-client’s default process and Node.js metrics', () => {
    const others = [...served.keys()].filter((name) => !name.startsWith('pgward_'));
    expect(others.length).toBeGreaterThan(0);
    expect(others.filter((name) => !/^(process|nodejs)_/.test(name))).toEqual([]);
  });
});

describe('ops/: alert rules and dashboard', () => {
  it('the checker finds what it must: a syntax error, an unknown metric, a rate of a gauge', () => {
    expect(promqlProblems('sum(rate(pgward_http_requests_total[5m])')).toEqual([expect.stringMatching(/^syntax error/)]);
    expect(promqlProblems('pgward_no_such_metric > 0')).toEqual(['pgward_no_such_metric is not on /metrics']);
    expect(promqlProblems('rate(pgward_worker_up[5m])')).toEqual(['rate() of pgward_worker_up, a gauge']);
    expect(promqlProblems('histogram_quantile(0.99, sum by (le) (rate(pgward_http_request_duration_seconds_bucket[5m])))')).toEqual([]);
  });

  it('every alert rule has a name, a severity and a summary, and an expression that parses and names metrics pgward serves', async () => {
    const rules = parseYaml(await readFile('ops/prometheus/alerts.yml', 'utf8')) as { groups: { name: string; rules: { alert: string; expr: string; labels: { severity: string }; annotations: { summary: string } }[] }[] };
    const all = rules.groups.flatMap((group) => group.rules);
    expect(all.length).toBeGreaterThanOrEqual(20);
    expect(new Set(all.map((rule) => rule.alert)).size).toBe(all.length);
    const problems = all.flatMap((rule) => [
      ...(['warning', 'critical'].includes(rule.labels?.severity) ? [] : [`${rule.alert}: severity ${rule.labels?.severity}`]),
      ...(rule.annotations?.summary ? [] : [`${rule.alert}: no summary`]),
      ...promqlProblems(rule.expr).map((problem) => `${rule.alert}: ${problem}`),
    ]);
    expect(problems).toEqual([]);
    // What issue 18 asks the rules to watch.
    const watched = all.map((rule) => rule.expr).join('\n');
    for (const metric of ['pgward_worker_up', 'pgward_worker_restarts_total', 'pgward_projection_lag_events', 'pgward_audit_gap_decisions_total', 'pgward_ingest_records_total', 'pgward_proxy_connections_refused_total', 'pgward_proxy_upstream_unavailable_total', 'pgward_http_requests_total', 'pgward_http_request_duration_seconds_bucket']) {
      expect(watched).toContain(metric);
    }
  });

  it('every panel of the Grafana dashboard queries the Prometheus data source with expressions that parse and name metrics pgward serves', async () => {
    type Panel = { title: string; type: string; datasource?: { type: string }; targets?: { expr: string }[]; panels?: Panel[] };
    const dashboard = JSON.parse(await readFile('ops/grafana/pgward.json', 'utf8')) as { uid: string; panels: Panel[] };
    const panels = dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]).filter((panel) => panel.type !== 'row');
    expect(panels.length).toBeGreaterThanOrEqual(20);
    const problems = panels.flatMap((panel) => [
      ...(panel.datasource?.type === 'prometheus' && panel.targets?.length ? [] : [`${panel.title}: no Prometheus query`]),
      ...(panel.targets ?? []).flatMap((target) => promqlProblems(target.expr).map((problem) => `${panel.title}: ${problem}`)),
    ]);
    expect(problems).toEqual([]);
  });
});
