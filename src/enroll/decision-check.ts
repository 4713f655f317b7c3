import type { BusRecord } from '../../proxy/decisions.js';
import { SessionsRecord } from '../events/connections.js';
import { parseStatementDecided } from '../events/statement-decided-check.js';
import { isEnrolledProxyId } from './token.js';

/** Why a decision message may not come from this enrollment's data plane, or undefined when it may. */
export function decisionRefusal(data: Uint8Array, projectId: string, enrollmentId: string): string | undefined {
  let record: BusRecord;
  try {
    record = JSON.parse(Buffer.from(data).toString('utf8')) as BusRecord;
  } catch {
    return 'the message is not JSON';
  }
  if (typeof record !== 'object' || record === null) return 'expected a decision, a batch, a gap or sessions';
  if (record.kind === 'gap') {
    if (record.project_id !== projectId || typeof record.proxy_id !== 'string' || !isEnrolledProxyId(record.proxy_id, enrollmentId)) return 'a gap must name this enrollment’s project and one of its proxies';
    return undefined;
  }
  if (record.kind === 'sessions') {
    const parsed = SessionsRecord.safeParse(record);
    if (!parsed.success) return `sessions: ${parsed.error.message.slice(0, 500)}`;
    if (!isEnrolledProxyId(parsed.data.proxy_id, enrollmentId) || parsed.data.sessions.some((mark) => mark.project_id !== projectId)) return 'sessions must name this enrollment’s project and one of its proxies';
    return undefined;
  }
  const decisions = record.kind === 'batch' && Array.isArray(record.decisions) ? record.decisions : record.kind === 'decision' ? [record.decision] : undefined;
  if (!decisions) return 'expected a decision, a batch, a gap or sessions';
  for (const [index, raw] of decisions.entries()) {
    let decision;
    try {
      decision = parseStatementDecided(raw);
    } catch (error) {
      return `decision ${index}: ${(error as Error).message.slice(0, 500)}`;
    }
    if (decision.project_id !== projectId) return `decision ${index}: names project ${decision.project_id}, not this enrollment’s`;
    if (decision.proxy_id === null || !isEnrolledProxyId(decision.proxy_id, enrollmentId)) return `decision ${index}: its proxy_id must start with ${enrollmentId}:`;
  }
  return undefined;
}
