import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { HoneytokenId, ProjectId, QualifiedColumn, QualifiedTable, text } from './fields.js';

export const HoneytokenKind = z.enum(['table', 'column', 'value']);
export type HoneytokenKind = z.infer<typeof HoneytokenKind>;

/** What `target` must look like for each kind: `schema.table`, `schema.table.column`, or a literal value. */
const targetByKind: Readonly<Record<HoneytokenKind, z.ZodType<string>>> = {
  table: QualifiedTable,
  column: QualifiedColumn,
  value: text(1_000, 1),
};

/** Whether `target` has the shape its kind needs. */
export function targetFitsKind(kind: HoneytokenKind, target: string): boolean {
  return targetByKind[kind].safeParse(target).success;
}

/** A honeytoken was planted: touching its target trips the canary (audit event `canary_tripped`). */
export const HoneytokenCreated = defineEvent(
  'HoneytokenCreated',
  1,
  z
    .strictObject({
      honeytoken_id: HoneytokenId,
      project_id: ProjectId,
      kind: HoneytokenKind,
      target: z.string(),
      /** Whether tripping it also disables the credential that touched it. */
      disable_credential: z.boolean(),
    })
    .refine((h) => targetFitsKind(h.kind, h.target), { message: 'target does not fit its kind', path: ['target'] }),
);
export type HoneytokenCreated = z.infer<typeof HoneytokenCreated.schema>;

/** A honeytoken was removed. */
export const HoneytokenDeleted = defineEvent('HoneytokenDeleted', 1, z.strictObject({ honeytoken_id: HoneytokenId }));
export type HoneytokenDeleted = z.infer<typeof HoneytokenDeleted.schema>;
