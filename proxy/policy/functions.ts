/**
 * The vetted function allowlist: pg_catalog functions that only compute a value from their
 * arguments (or read the clock, or whether the server is a standby), with no side effect, no file, network, lock, sequence or session
 * state, and no query text of their own. Everything else is refused by default. Volatile entries
 * are listed on purpose (random, clock_timestamp, gen_random_uuid): volatile is not a side effect.
 * pg_sleep is left out on purpose: read-only, but a way to hold upstream connections.
 */
const vetted = `
  abs cbrt ceil ceiling degrees div exp factorial floor gcd lcm ln log log10 min_scale mod pi power pow radians round scale sign
  sqrt trim_scale trunc width_bucket acos acosd asin asind atan atan2 atan2d atand cos cosd cot cotd sin sind tan tand sinh cosh tanh
  asinh acosh atanh random random_normal numeric int2 int4 int8 float4 float8 text bool date
  ascii bit_length btrim char_length character_length chr concat concat_ws format initcap left length lower lpad ltrim md5
  octet_length overlay position quote_ident quote_literal quote_nullable regexp_count regexp_instr regexp_like regexp_match
  regexp_matches regexp_replace regexp_split_to_array regexp_split_to_table regexp_substr repeat replace reverse right rpad rtrim
  split_part starts_with strpos substr substring to_ascii to_hex translate upper unistr normalize is_normalized
  encode decode convert convert_from convert_to sha224 sha256 sha384 sha512 string_to_array string_to_table array_to_string
  to_char to_date to_number to_timestamp age clock_timestamp date_add date_bin date_part date_subtract date_trunc
  extract isfinite justify_days justify_hours justify_interval make_date make_interval make_time make_timestamp make_timestamptz
  now statement_timestamp timeofday transaction_timestamp timezone
  count sum avg min max string_agg array_agg bool_and bool_or every bit_and bit_or bit_xor any_value stddev stddev_pop stddev_samp
  variance var_pop var_samp corr covar_pop covar_samp regr_avgx regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx
  regr_sxy regr_syy percentile_cont percentile_disc mode rank dense_rank percent_rank cume_dist
  json_agg jsonb_agg json_object_agg jsonb_object_agg json_agg_strict jsonb_agg_strict json_object_agg_strict
  jsonb_object_agg_strict json_object_agg_unique jsonb_object_agg_unique
  row_number ntile lag lead first_value last_value nth_value
  to_json to_jsonb array_to_json row_to_json json_build_array jsonb_build_array json_build_object jsonb_build_object json_object
  jsonb_object json_array_length jsonb_array_length json_each jsonb_each json_each_text jsonb_each_text json_extract_path
  jsonb_extract_path json_extract_path_text jsonb_extract_path_text json_object_keys jsonb_object_keys json_array_elements
  jsonb_array_elements json_array_elements_text jsonb_array_elements_text json_typeof jsonb_typeof json_strip_nulls
  jsonb_strip_nulls jsonb_pretty jsonb_set jsonb_set_lax jsonb_insert jsonb_path_exists jsonb_path_match jsonb_path_query
  jsonb_path_query_array jsonb_path_query_first
  array_append array_cat array_dims array_fill array_length array_lower array_ndims array_position array_positions array_prepend
  array_remove array_replace array_upper array_sample array_shuffle cardinality trim_array unnest generate_series generate_subscripts
  num_nonnulls num_nulls gen_random_uuid pg_typeof
  range_merge lower_inc upper_inc lower_inf upper_inf isempty multirange int4range int8range numrange tsrange tstzrange daterange
  json_to_record json_to_recordset jsonb_to_record jsonb_to_recordset json_populate_record json_populate_recordset
  jsonb_populate_record jsonb_populate_recordset
  to_tsvector to_tsquery plainto_tsquery phraseto_tsquery websearch_to_tsquery ts_rank ts_rank_cd setweight strip numnode querytree
  tsvector_to_array array_to_tsvector
  pg_size_pretty pg_size_bytes pg_is_in_recovery
  like_escape similar_to_escape overlaps
`;

export const VETTED_FUNCTIONS: ReadonlySet<string> = new Set(vetted.split(/\s+/).filter((name) => name !== ''));

/** Functions that run query text or read a whole relation by name: the classic ways around table and read-only checks. */
export const QUERY_TEXT_FUNCTIONS: ReadonlySet<string> = new Set([
  'query_to_xml',
  'query_to_xml_and_xmlschema',
  'query_to_xmlschema',
  'cursor_to_xml',
  'table_to_xml',
  'table_to_xml_and_xmlschema',
  'schema_to_xml',
  'database_to_xml',
  'dblink',
  'dblink_exec',
]);

/**
 * Names that turn `rel.name` into `name(rel)` when the relation has no column of that name
 * (PostgreSQL's attribute notation): every pg_catalog function of PostgreSQL 17 callable with one
 * record, anyelement or "any" argument, plus hstore. A whole-row read in disguise.
 */
export const ROW_FUNCTION_NAMES: ReadonlySet<string> = new Set(
  `any_out any_value anycompatible_out anycompatiblenonarray_out anyelement_out anynonarray_out array_agg concat count cume_dist
  dense_rank first_value hash_record json_agg json_agg_strict json_build_array json_build_object jsonb_agg jsonb_agg_strict
  jsonb_build_array jsonb_build_object lag last_value lead mode num_nonnulls num_nulls percent_rank pg_collation_for
  pg_column_compression pg_column_size pg_column_toast_chunk_id pg_typeof quote_literal quote_nullable rank record_out record_send
  row_to_json to_json to_jsonb hstore`.split(/\s+/),
);

/**
 * Text search functions whose two-argument form takes a configuration (regconfig) first: the name
 * is looked up in the catalog, so it must be a built-in configuration written as a constant.
 */
export const CONFIG_FIRST_FUNCTIONS: ReadonlySet<string> = new Set(['to_tsvector', 'to_tsquery', 'plainto_tsquery', 'phraseto_tsquery', 'websearch_to_tsquery']);

/** PostgreSQL 17's built-in text search configurations (pg_ts_config in pg_catalog). */
export const BUILTIN_TEXT_SEARCH_CONFIGS: ReadonlySet<string> = new Set(
  `arabic armenian basque catalan danish dutch english finnish french german greek hindi hungarian indonesian irish italian
  lithuanian nepali norwegian portuguese romanian russian serbian simple spanish swedish tamil turkish yiddish`.split(/\s+/),
);

/**
 * Vetted alternatives for functions agents reach for that are not vetted (other dialects' names,
 * catalog lookups, settings): the refusal suggests them.
 */
export const FUNCTION_ALTERNATIVES: Readonly<Record<string, string>> = {
  current_setting: "current_setting('name') with a constant name of a setting SHOW may read, or SHOW name",
  ifnull: 'coalesce(a, b)',
  nvl: 'coalesce(a, b)',
  isnull: 'coalesce(a, b)',
  len: 'length(s)',
  ucase: 'upper(s)',
  lcase: 'lower(s)',
  instr: 'strpos(s, sub)',
  charindex: 'strpos(s, sub)',
  locate: 'strpos(s, sub)',
  substring_index: 'split_part(s, delimiter, n)',
  group_concat: "string_agg(x, ',')",
  listagg: "string_agg(x, ',')",
  getdate: 'now()',
  sysdate: 'now()',
  curdate: 'current_date',
  datediff: "date subtraction (d1 - d2) or age(t1, t2)",
  dateadd: "date + interval '1 day', or date_add(t, interval)",
  date_format: "to_char(t, 'YYYY-MM-DD')",
  strftime: "to_char(t, 'YYYY-MM-DD')",
  json_extract: "jsonb_extract_path(j, 'key') or j -> 'key'",
  nextval: 'none: sequences have side effects; read the column values instead',
  pg_sleep: 'none: it would hold an upstream connection',
  ts_headline: 'to_tsvector, to_tsquery and ts_rank',
  pg_total_relation_size: 'pg_size_pretty(n) on numbers you have; relation sizes need catalog access',
  pg_relation_size: 'pg_size_pretty(n) on numbers you have; relation sizes need catalog access',
};
