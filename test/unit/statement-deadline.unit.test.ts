import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { agentErrorEdit, CANCEL_GRACE_MS, StatementDeadline, statementTimeoutMs } from '../../proxy/statement-deadline.js';

let events: string[];
let deadline: StatementDeadline;

beforeEach(() => {
  vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  events = [];
  deadline = new StatementDeadline({ expired: (limit) => events.push(`expired ${limit}`), stuck: (limit) => events.push(`stuck ${limit}`) });
});
afterEach(() => {
  deadline.close();
  vi.useRealTimers();
});

describe('statementTimeoutMs', () => {
  it("is the policy's limit (30 s when it names none), or the database's when that is smaller and set", () => {
    expect(statementTimeoutMs(undefined, 0)).toBe(30_000);
    expect(statementTimeoutMs({ statement_timeout_ms: 5_000 }, 0)).toBe(5_000);
    expect(statementTimeoutMs({ statement_timeout_ms: 5_000 }, 2_000)).toBe(2_000);
    expect(statementTimeoutMs({ statement_timeout_ms: 5_000 }, 9_000)).toBe(5_000);
  });
});

describe('StatementDeadline', () => {
  it('cancels work running past its limit, then ends the session a grace period later', () => {
    deadline.start(1_000);
    vi.advanceTimersByTime(999);
    expect(events).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(events).toEqual(['expired 1000']);
    vi.advanceTimersByTime(CANCEL_GRACE_MS - 1);
    expect(events).toEqual(['expired 1000']);
    vi.advanceTimersByTime(1);
    expect(events).toEqual(['expired 1000', 'stuck 1000']);
  });

  it('says nothing of work that ended in time, and times each piece of work from its own start', () => {
    deadline.start(1_000);
    vi.advanceTimersByTime(600);
    deadline.stop();
    deadline.start(1_000);
    vi.advanceTimersByTime(600);
    expect(events).toEqual([]);
    vi.advanceTimersByTime(400);
    expect(events).toEqual(['expired 1000']);
    deadline.stop();
    vi.advanceTimersByTime(CANCEL_GRACE_MS * 2);
    expect(events).toEqual(['expired 1000']);
  });

  it('gives work started after a cancelled one its full limit, not the grace period left', () => {
    deadline.start(1_000);
    vi.advanceTimersByTime(1_000);
    deadline.stop();
    deadline.start(1_000);
    vi.advanceTimersByTime(1_000);
    expect(events).toEqual(['expired 1000', 'expired 1000']);
  });

  it('stops timing when closed', () => {
    deadline.start(1_000);
    deadline.close();
    vi.advanceTimersByTime(10_000);
    expect(events).toEqual([]);
  });
});

describe('agentErrorEdit', () => {
  const cancelled = { severity: 'ERROR', code: '57014', message: 'canceling statement due to user request' };
  const failed = { severity: 'ERROR', code: '23502', message: 'null value', detail: 'Failing row contains (1, user1@example.com).' };

  it('passes errors on unchanged when there is nothing to hide or explain', () => {
    expect(agentErrorEdit(false, undefined)).toBeUndefined();
    expect(agentErrorEdit(false, 1_000)!(failed)).toBe(failed);
    expect(agentErrorEdit(true, undefined)!(cancelled)).toBe(cancelled);
  });

  it("says a gateway cancel was the statement timeout, and drops the DETAIL under masks", () => {
    expect(agentErrorEdit(false, 1_000)!(cancelled)).toEqual({ ...cancelled, message: expect.stringMatching(/^canceling statement due to statement timeout: this credential’s statements may run 1000 ms/) });
    expect(agentErrorEdit(true, undefined)!(failed)).toEqual({ ...failed, detail: undefined });
  });
});
