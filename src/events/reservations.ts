import { z } from 'zod';
import { defineEvent } from './envelope.js';
import { text } from './fields.js';

/**
 * A unique name (a domain's host name, a branch's name within its database) was taken by `holder`
 * (the resource's id), on the name's own stream `reservation-<sha256 of the key>`: appended with
 * the stream's expected revision, so of two concurrent takers one wins (src/reservations.ts).
 */
export const NameReserved = defineEvent('NameReserved', 1, z.strictObject({ key: text(400, 1), holder: z.string().regex(/^[a-z]+_[A-Za-z0-9]{10,40}$/) }));
export type NameReserved = z.infer<typeof NameReserved.schema>;

/** The name's holder let it go (deleted, or its create failed): anyone may take it again. */
export const NameReleased = defineEvent('NameReleased', 1, z.strictObject({ key: text(400, 1), holder: z.string().regex(/^[a-z]+_[A-Za-z0-9]{10,40}$/) }));
export type NameReleased = z.infer<typeof NameReleased.schema>;
