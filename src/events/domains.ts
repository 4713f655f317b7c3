import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { DomainId, ProjectId } from './fields.js';

const LABEL = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Why `value` is no custom domain's host name, or undefined when it is one: 1-253 characters,
 * two or more dot-separated labels of 1-63 letters, digits and inner hyphens (spec §2.11). Pure.
 * An IP literal is no host name (the last label of a name is never all digits), and neither is a
 * wildcard, a trailing dot or a single label.
 */
export function hostnameProblem(value: string): string | undefined {
  if (value.length < 1 || value.length > 253) return 'must be 1-253 characters';
  if (value.includes(':') || /^[0-9.]+$/.test(value)) return 'must be a host name, not an IP address';
  if (value.includes('*')) return 'must name one host: wildcards are not supported';
  const labels = value.split('.');
  if (labels.length < 2) return 'must have at least two labels, such as db.example.com';
  const bad = labels.find((label) => !LABEL.test(label));
  if (bad !== undefined) {
    return bad === '' ? 'has an empty label (two dots in a row, or a leading or trailing dot)' : `label ${JSON.stringify(bad)} must be 1-63 letters, digits and inner hyphens`;
  }
  if (/^[0-9]+$/.test(labels.at(-1)!)) return 'its last label must not be all digits';
  return undefined;
}

/** A custom domain's host name as stored: lowercase, checked by hostnameProblem. */
export const Hostname = z.string().superRefine((value, ctx) => {
  const problem = hostnameProblem(value);
  if (problem) ctx.addIssue({ code: 'custom', message: problem });
});

/** A host name as a request gives it: any case (DNS names are case-insensitive), stored lowercased. */
export const HostnameInput = z
  .string()
  .max(253, { message: 'must be 1-253 characters' })
  // Before lowercasing: some non-ASCII letters lowercase to ASCII ones (the Kelvin sign to k).
  .regex(/^[\x21-\x7e]*$/, { message: 'must be ASCII without spaces (an internationalized name in its xn-- form)' })
  .transform((value) => value.toLowerCase())
  .pipe(Hostname);

/** A custom domain was added to a project, unverified; its TXT record must carry `dns_verification_token`. */
export const DomainCreated = defineEvent(
  'DomainCreated',
  1,
  z.strictObject({ domain_id: DomainId, project_id: ProjectId, domain: Hostname, dns_verification_token: z.string().regex(/^pgward-verify-[a-z0-9]{32}$/) }),
);
export type DomainCreated = z.infer<typeof DomainCreated.schema>;

/** The domain's TXT record was found carrying its token: ownership proven. */
export const DomainVerified = defineEvent('DomainVerified', 1, z.strictObject({ domain_id: DomainId, record_name: z.string().max(300) }));
export type DomainVerified = z.infer<typeof DomainVerified.schema>;

/** The domain was removed from its project. */
export const DomainDeleted = defineEvent('DomainDeleted', 1, z.strictObject({ domain_id: DomainId }));
export type DomainDeleted = z.infer<typeof DomainDeleted.schema>;
