import { z } from 'zod';
import { ipRules, ipRulesStream } from '../../../commands/ip-rules/ip-rules.js';
import { evolveIpRules, type IpRulesRow } from '../../../projections/ip-rules.js';
import { findIpRules } from '../../../queries/ip-rules.js';
import { MAX_IP_RULE_ENTRIES, type StoredCidrEntry } from '../../events/ip-rules.js';
import { text } from '../../events/fields.js';
import { CidrError, parseCidr } from '../../net/cidr.js';
import { visibleProject } from './projects.js';
import { errorResponses, etag, execute, foldStream, IdParam, ifMatch, iso, readModelOrStream, requireRole, Timestamp, type Api, type ApiDeps } from './support.js';

const CIDR_SHAPE = 'an IPv4 or IPv6 address with an optional /prefix, such as 203.0.113.0/24, 10.1.2.3 or 2001:db8::/32';

function cidrProblem(cidr: string): string | undefined {
  try {
    parseCidr(cidr);
    return undefined;
  } catch (error) {
    if (error instanceof CidrError) return `${error.message}: expected ${CIDR_SHAPE}`;
    throw error;
  }
}

const CidrEntry = z
  .strictObject({
    cidr: z
      .string()
      .max(100)
      .superRefine((cidr, ctx) => {
        const problem = cidrProblem(cidr);
        if (problem) ctx.addIssue({ code: 'custom', message: problem });
      })
      .describe(`${CIDR_SHAPE}. A bare address is /32 (IPv4) or /128 (IPv6); answers give it normalised: host bits cleared, IPv6 compressed, IPv4-mapped IPv6 as IPv4`),
    label: text(100).optional().describe('What the range is, for people (at most 100 characters)'),
  })
  .meta({ id: 'CidrEntry' });

const CidrList = (what: string) => z.array(CidrEntry).max(MAX_IP_RULE_ENTRIES).default([]).describe(what);

/** Two entries of one list that normalise to the same range: the second is refused, naming the first. */
function duplicates(list: readonly { cidr: string }[], path: string, ctx: z.RefinementCtx): void {
  const seen = new Map<string, number>();
  list.forEach((entry, index) => {
    if (cidrProblem(entry.cidr)) return;
    const range = parseCidr(entry.cidr).text;
    const first = seen.get(range);
    if (first === undefined) seen.set(range, index);
    else ctx.addIssue({ code: 'custom', message: `is ${range} again (as ${path}.${first}); list each range once`, path: [path, index, 'cidr'] });
  });
}

/** An allow and a deny list as a request gives them: a project's (PUT .../ip-rules) or a credential's (PATCH .../agents/{agent_id}). */
export const IpRuleListsBody = z
  .strictObject({
    allow: CidrList(`Ranges connections may come from; empty allows every address not denied (at most ${MAX_IP_RULE_ENTRIES})`),
    deny: CidrList(`Ranges connections are refused from, whatever the allow list says (at most ${MAX_IP_RULE_ENTRIES})`),
  })
  .superRefine((body, ctx) => {
    duplicates(body.allow, 'allow', ctx);
    duplicates(body.deny, 'deny', ctx);
  });

const PutIpRulesRequest = IpRuleListsBody.meta({ title: 'PutIpRulesRequest' });

/** Both lists as answers give them. */
export const IpRuleListsView = z.object({ allow: z.array(CidrEntry), deny: z.array(CidrEntry) });

/** The lists of a request as stored: each range normalised. */
export function storedLists(body: z.infer<typeof IpRuleListsBody>): { allow: StoredCidrEntry[]; deny: StoredCidrEntry[] } {
  return { allow: stored(body.allow), deny: stored(body.deny) };
}

const IpRules = z
  .object({
    project_id: z.string(),
    allow: z.array(CidrEntry),
    deny: z.array(CidrEntry),
    version: z.number().int().describe('How many times the rules were set; 0 before the first. The ETag'),
    updated_at: Timestamp.nullable().describe('When the rules were last set; null before the first'),
  })
  .meta({ id: 'IpRules' });

function toIpRules(projectId: string, row: IpRulesRow | undefined): z.infer<typeof IpRules> {
  return { project_id: projectId, allow: row?.allow ?? [], deny: row?.deny ?? [], version: row?.version ?? 0, updated_at: row ? iso(row.updated_at) : null };
}

function stored(entries: readonly z.infer<typeof CidrEntry>[]): StoredCidrEntry[] {
  return entries.map((entry) => ({ cidr: parseCidr(entry.cidr).text, ...(entry.label === undefined ? {} : { label: entry.label }) }));
}

const ProjectParams = z.object({ project_id: IdParam('project id') });

const ENFORCEMENT =
  'Enforced where agents connect: a wire login from a refused address fails as a wrong password would (audited as auth_failed, rule ip_rules), ' +
  'and the hosted agent MCP answers 403. Deny wins; an empty allow list allows every address.';

export function ipRuleRoutes(app: Api, deps: ApiDeps): void {
  app.get(
    '/v1/projects/:project_id/ip-rules',
    {
      schema: {
        operationId: 'getIpRules',
        summary: 'Get a project’s IP allow and deny lists',
        description: `${ENFORCEMENT} The ETag is the rules' version, for If-Match on PUT.`,
        tags: ['ip-rules'],
        params: ProjectParams,
        response: { 200: IpRules, ...errorResponses('FORBIDDEN', 'NOT_FOUND') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'member');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const row = await readModelOrStream(deps, () => findIpRules(deps.pool, projectId), ipRulesStream(projectId), evolveIpRules);
      etag(reply, row?.version ?? 0);
      return toIpRules(projectId, row);
    },
  );

  app.put(
    '/v1/projects/:project_id/ip-rules',
    {
      schema: {
        operationId: 'setIpRules',
        summary: 'Replace a project’s IP allow and deny lists',
        description: `${ENFORCEMENT} Live wire sessions from an address the new rules refuse are ended. Honours If-Match (412 when the rules changed since); setting the rules they already are changes nothing.`,
        tags: ['ip-rules'],
        params: ProjectParams,
        body: PutIpRulesRequest,
        response: { 200: IpRules, ...errorResponses('FORBIDDEN', 'NOT_FOUND', 'PRECONDITION_FAILED', 'UNSUPPORTED_MEDIA_TYPE') },
      },
    },
    async (request, reply) => {
      const caller = requireRole(request, 'admin');
      const projectId = (await visibleProject(deps, caller.orgId, request.params.project_id)).project_id;
      const stream = ipRulesStream(projectId);
      await execute(deps, request, stream, ipRules, { projectId, ...storedLists(request.body), ifVersion: ifMatch(request) });
      const row = await foldStream(deps, stream, evolveIpRules);
      etag(reply, row?.version ?? 0);
      return toIpRules(projectId, row);
    },
  );
}
