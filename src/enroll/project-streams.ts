import { OrganizationCreated, OrganizationPlanChanged } from '../events/organizations.js';
import type { EventStore, RecordedEvent } from '../store/port.js';
import { DATA_PLANE_PREFIXES } from './wire.js';

/** Categories whose streams name no project: each stream's first event says whose it is. */
const OWNED_BY_FIRST_EVENT = ['credential-', 'policy-', 'honeytoken-', 'approval-', 'branch-', 'cache-'] as const;

/** Of an organization's stream a data plane sees its plan, never its API keys (hashed as they are). */
const ORG_EVENT_TYPES: ReadonlySet<string> = new Set([OrganizationCreated.type, OrganizationPlanChanged.type]);

/**
 * Which events of the control plane's store belong to one project, as its data plane may see
 * them: its own `project-`, `hashkey-` and `iprules-` streams, its organization's plan, and the credential,
 * policy, honeytoken, approval, branch and cache streams whose first event names the project. Ownership never
 * changes, so it is remembered per stream.
 */
export class ProjectStreams {
  private readonly owners = new Map<string, string | null>();

  constructor(
    private readonly store: Pick<EventStore, 'readStream'>,
    readonly projectId: string,
    readonly orgId: string,
  ) {}

  /** Whether `stream` may be read by the project's data plane. */
  async owns(stream: string): Promise<boolean> {
    if (!DATA_PLANE_PREFIXES.some((prefix) => stream.startsWith(prefix))) return false;
    if (stream.startsWith('project-')) return stream === `project-${this.projectId}`;
    if (stream.startsWith('hashkey-')) return stream === `hashkey-${this.projectId}`;
    if (stream.startsWith('iprules-')) return stream === `iprules-${this.projectId}`;
    if (stream.startsWith('org-')) return stream === `org-${this.orgId}`;
    if (!OWNED_BY_FIRST_EVENT.some((prefix) => stream.startsWith(prefix))) return false;
    return (await this.ownerOf(stream)) === this.projectId;
  }

  /** Whose `stream` is: the project's, another's, or nobody's yet (a stream of a first-event category not yet written). */
  async whose(stream: string): Promise<'ours' | 'other' | 'none'> {
    if (await this.owns(stream)) return 'ours';
    const firstEventCategory = OWNED_BY_FIRST_EVENT.some((prefix) => stream.startsWith(prefix));
    return firstEventCategory && !this.owners.has(stream) ? 'none' : 'other';
  }

  /** Whether the event may be shown to the project's data plane. */
  async shows(event: RecordedEvent): Promise<boolean> {
    if (event.revision === 0 && OWNED_BY_FIRST_EVENT.some((prefix) => event.stream.startsWith(prefix)) && !this.owners.has(event.stream)) {
      this.owners.set(event.stream, projectOf(event));
    }
    if (!(await this.owns(event.stream))) return false;
    return !event.stream.startsWith('org-') || ORG_EVENT_TYPES.has(event.type);
  }

  private async ownerOf(stream: string): Promise<string | null> {
    const known = this.owners.get(stream);
    if (known !== undefined) return known;
    const [first] = await this.store.readStream(stream);
    const owner = first ? projectOf(first) : null;
    // A stream not yet written has no owner to remember: its first event may still come.
    if (first) this.owners.set(stream, owner);
    return owner;
  }
}

/** The `project_id` an event's payload names at its top level, if any. */
export function projectOf(event: Pick<RecordedEvent, 'data'>): string | null {
  try {
    const data = JSON.parse(Buffer.from(event.data).toString('utf8')) as { project_id?: unknown };
    return typeof data.project_id === 'string' ? data.project_id : null;
  } catch {
    return null;
  }
}
