/**
 * Session settings an agent may change with SET, SET LOCAL, RESET or set_config: presentation and
 * time limits only. Everything that could relax the policy or the parser's view of the text is
 * refused: role, session_authorization, search_path, transaction_read_only and
 * default_transaction_read_only, standard_conforming_strings and client_encoding (both change how
 * the same bytes lex upstream), and anything unknown (custom parameters may hold secrets).
 */
export const SETTABLE: ReadonlySet<string> = new Set([
  'application_name',
  'statement_timeout',
  'lock_timeout',
  'idle_in_transaction_session_timeout',
  'timezone',
  'datestyle',
  'intervalstyle',
  'extra_float_digits',
  'bytea_output',
  'client_min_messages',
  'default_transaction_isolation',
  'transaction_isolation',
  'lc_monetary',
  'lc_numeric',
  'lc_time',
]);

/** Settings SHOW may read: the settable ones and what drivers ask for at connect. */
export const SHOWABLE: ReadonlySet<string> = new Set([
  ...SETTABLE,
  'server_version',
  'server_version_num',
  'server_encoding',
  'client_encoding',
  'standard_conforming_strings',
  'integer_datetimes',
  'search_path',
  'transaction_read_only',
  'default_transaction_read_only',
  'max_identifier_length',
  'is_superuser',
]);

/** Transaction options that keep or tighten read-only mode; `transaction_read_only = 0` (READ WRITE) relaxes it. */
export function relaxesReadOnly(option: string, value: string | undefined): boolean {
  return option === 'transaction_read_only' && value !== '1' && value !== 'true' && value !== 'on';
}
