import type { AuditHold } from '../../../proxy/audit-backpressure.js';
import type { EventStore } from '../../store/port.js';
import type pg from 'pg';
import type { BaseLogger } from 'pino';
import type { z } from 'zod';
import type { PolicyRow } from '../../../projections/policies.js';
import type { Budgets, SessionBudgets } from '../../../proxy/budgets.js';
import type { DecisionPublisher } from '../../../proxy/decisions.js';
import type { Honeytokens } from '../../../proxy/policy/hook.js';
import type { TokenCredential } from '../../../queries/credentials.js';
import type { DocsLibrary } from '../docs.js';
import type { McpTool } from '../tool.js';
import type { AgentDatabases, AgentUpstream } from './upstream.js';
import type { AgentCache } from './cache.js';
import type { HashKey } from '../../../proxy/policy/hash-key.js';

/** What every agent MCP request shares: the upstream pools, the decision publisher, the docs. */
export interface AgentServices {
  /** The read models. */
  readonly pool: pg.Pool;
  readonly databases: AgentDatabases;
  readonly decisions: DecisionPublisher;
  /** Told each decision of a credential: the audit's back-pressure holds the credentials that make the most. */
  readonly auditHold?: Pick<AuditHold, 'used'>;
  /** Budget tallies of every credential this process serves, as the proxy keeps its own. */
  readonly budgets: Budgets;
  /** The data-plane region audit entries carry. */
  readonly region: string;
  readonly docs: DocsLibrary;
  /** The event store: statements the policy holds are recorded there as approval requests. */
  readonly store: Pick<EventStore, 'readStream' | 'append'>;
  /** The `query` tool's result cache, sharing invalidations with the proxy's. */
  readonly cache: AgentCache;
}

/** One authenticated agent MCP request: the credential, its policy and honeytokens, and where it came from. */
export interface AgentContext {
  readonly services: AgentServices;
  readonly credential: TokenCredential;
  /** Undefined when the credential's policy profile is gone: every statement is then refused. */
  readonly policy: PolicyRow | undefined;
  readonly honeytokens: Honeytokens<TokenCredential>;
  /** The project's key for `hash` masks, when the policy masks with hash and the key could be read. */
  readonly hashKey: HashKey | undefined;
  /** The credential's budgets (its policy's and its organization's plan's), read from the trail for this period. */
  readonly budgets: SessionBudgets;
  /** The upstream pool its statements run on, as the wire would choose it. */
  readonly upstream: AgentUpstream;
  /** Groups the statements of this HTTP request in the audit trail. */
  readonly sessionId: string;
  readonly clientIp: string;
  /** The request's logger, for the security events its statements raise. */
  readonly log: Pick<BaseLogger, 'info' | 'warn'>;
}

export type AgentTool<Input extends z.ZodType> = McpTool<Input, AgentContext>;
