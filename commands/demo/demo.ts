import type { z } from 'zod';
import type { CatalogEvent } from '../../src/events/catalog.js';
import { DemoPaused, DemoProvisioned, DemoResumed } from '../../src/events/demo.js';
import { DomainError } from '../domain-error.js';
import { emit, type Aggregate } from '../handle.js';

/** The demo of a deployment: one stream, `demo-shop`. */
export const DEMO_STREAM = 'demo-shop';

export interface DemoState {
  readonly provisioned?: DemoProvisioned;
  readonly paused: boolean;
  readonly pausedReason: string;
}

export type DemoCommand =
  | { readonly kind: 'provision'; readonly demo: z.input<typeof DemoProvisioned.schema> }
  | { readonly kind: 'pause'; readonly reason: string }
  | { readonly kind: 'resume' };

export function evolveDemo(state: DemoState, event: CatalogEvent): DemoState {
  switch (event.type) {
    case DemoProvisioned.type:
      return { ...state, provisioned: event.data };
    case DemoPaused.type:
      return { ...state, paused: true, pausedReason: event.data.reason };
    case DemoResumed.type:
      return { ...state, paused: false, pausedReason: '' };
    default:
      return state;
  }
}

export const demo: Aggregate<DemoState, DemoCommand> = {
  initial: { paused: false, pausedReason: '' },
  evolve: evolveDemo,
  decide(state, command) {
    if (command.kind === 'provision') {
      return state.provisioned ? new DomainError('RESOURCE_EXISTS', 'the demo is already provisioned') : [emit(DemoProvisioned, command.demo)];
    }
    if (!state.provisioned) return new DomainError('NOT_FOUND', 'this deployment has no demo');
    // Asking for the state the demo is already in decides nothing, as the credential kill-switch.
    if (command.kind === 'pause') return state.paused ? [] : [emit(DemoPaused, { reason: command.reason })];
    return state.paused ? [emit(DemoResumed, {})] : [];
  },
};
