import type pg from 'pg';
import type { CreditBalanceRow } from '../projections/credits.js';

/** The organization's credit balance, or undefined when its ledger has no entry yet. */
export async function findCreditBalance(db: pg.Pool, orgId: string): Promise<CreditBalanceRow | undefined> {
  const { rows } = await db.query<{ row: CreditBalanceRow }>(`select to_jsonb(b) as row from rm.credit_balances b where org_id = $1`, [orgId]);
  return rows[0]?.row;
}
