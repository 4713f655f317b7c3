/** Schemas whose relations are system catalogs: readable only when the policy sets allow_catalog. */
export const CATALOG_SCHEMAS: ReadonlySet<string> = new Set(['pg_catalog', 'information_schema', 'pg_toast']);

/**
 * Type metadata that client drivers read on connect (postgres.js loads array types from pg_type,
 * others read pg_range): readable whatever allow_catalog says. They describe types, not data.
 */
export const DRIVER_METADATA: ReadonlySet<string> = new Set(['pg_catalog.pg_type', 'pg_catalog.pg_range']);

export function isTempSchema(schema: string): boolean {
  return /^pg_(toast_)?temp(_\d+)?$/.test(schema);
}

/**
 * Catalog relations that stay refused even with allow_catalog: password hashes, user-mapping
 * secrets, sampled column values (which would bypass masking), server settings that may hold
 * secrets in custom parameters, and other sessions' statement text. Every pg_toast relation is refused too: toast tables hold raw
 * column values.
 */
export const NEVER_READABLE: ReadonlySet<string> = new Set([
  'pg_catalog.pg_authid',
  'pg_catalog.pg_shadow',
  'pg_catalog.pg_user_mapping',
  'pg_catalog.pg_user_mappings',
  'pg_catalog.pg_statistic',
  'pg_catalog.pg_statistic_ext_data',
  'pg_catalog.pg_stats',
  'pg_catalog.pg_stats_ext',
  'pg_catalog.pg_stats_ext_exprs',
  'pg_catalog.pg_largeobject',
  'pg_catalog.pg_hba_file_rules',
  'pg_catalog.pg_ident_file_mappings',
  'pg_catalog.pg_file_settings',
  'pg_catalog.pg_settings',
  'pg_catalog.pg_db_role_setting',
  'pg_catalog.pg_subscription',
  // Every session's current or last statement text, with its literal values: other credentials', other databases'.
  'pg_catalog.pg_stat_activity',
]);

/**
 * Every table and view in pg_catalog of PostgreSQL 17 (`relkind in ('r','v','m','p','f')`). An
 * unqualified name in this list resolves to pg_catalog whenever pg_catalog is searched first.
 */
export const PG_CATALOG_RELATIONS: ReadonlySet<string> = new Set(
  `pg_aggregate pg_am pg_amop pg_amproc pg_attrdef pg_attribute pg_auth_members pg_authid pg_available_extension_versions
  pg_available_extensions pg_backend_memory_contexts pg_cast pg_class pg_collation pg_config pg_constraint pg_conversion pg_cursors
  pg_database pg_db_role_setting pg_default_acl pg_depend pg_description pg_enum pg_event_trigger pg_extension pg_file_settings
  pg_foreign_data_wrapper pg_foreign_server pg_foreign_table pg_group pg_hba_file_rules pg_ident_file_mappings pg_index pg_indexes
  pg_inherits pg_init_privs pg_language pg_largeobject pg_largeobject_metadata pg_locks pg_matviews pg_namespace pg_opclass
  pg_operator pg_opfamily pg_parameter_acl pg_partitioned_table pg_policies pg_policy pg_prepared_statements pg_prepared_xacts
  pg_proc pg_publication pg_publication_namespace pg_publication_rel pg_publication_tables pg_range pg_replication_origin
  pg_replication_origin_status pg_replication_slots pg_rewrite pg_roles pg_rules pg_seclabel pg_seclabels pg_sequence pg_sequences
  pg_settings pg_shadow pg_shdepend pg_shdescription pg_shmem_allocations pg_shseclabel pg_stat_activity pg_stat_all_indexes
  pg_stat_all_tables pg_stat_archiver pg_stat_bgwriter pg_stat_checkpointer pg_stat_database pg_stat_database_conflicts
  pg_stat_gssapi pg_stat_io pg_stat_progress_analyze pg_stat_progress_basebackup pg_stat_progress_cluster pg_stat_progress_copy
  pg_stat_progress_create_index pg_stat_progress_vacuum pg_stat_recovery_prefetch pg_stat_replication pg_stat_replication_slots
  pg_stat_slru pg_stat_ssl pg_stat_subscription pg_stat_subscription_stats pg_stat_sys_indexes pg_stat_sys_tables
  pg_stat_user_functions pg_stat_user_indexes pg_stat_user_tables pg_stat_wal pg_stat_wal_receiver pg_stat_xact_all_tables
  pg_stat_xact_sys_tables pg_stat_xact_user_functions pg_stat_xact_user_tables pg_statio_all_indexes pg_statio_all_sequences
  pg_statio_all_tables pg_statio_sys_indexes pg_statio_sys_sequences pg_statio_sys_tables pg_statio_user_indexes
  pg_statio_user_sequences pg_statio_user_tables pg_statistic pg_statistic_ext pg_statistic_ext_data pg_stats pg_stats_ext
  pg_stats_ext_exprs pg_subscription pg_subscription_rel pg_tables pg_tablespace pg_timezone_abbrevs pg_timezone_names
  pg_transform pg_trigger pg_ts_config pg_ts_config_map pg_ts_dict pg_ts_parser pg_ts_template pg_type pg_user pg_user_mapping
  pg_user_mappings pg_views pg_wait_events`.split(/\s+/),
);

/**
 * pg_catalog functions that describe catalog objects from the catalog and nothing else (no table
 * data, no file, no setting, no side effect): what psql's describe commands and drivers'
 * introspection call. They run only under allow_catalog, and only pg_catalog's (an unqualified call
 * is forwarded pg_catalog-qualified).
 */
export const CATALOG_DESCRIBING_FUNCTIONS: ReadonlySet<string> = new Set(
  `format_type pg_get_userbyid pg_get_expr pg_get_indexdef pg_get_constraintdef pg_get_statisticsobjdef_columns pg_get_triggerdef
  pg_get_ruledef pg_get_viewdef pg_get_partkeydef pg_get_partition_constraintdef pg_get_function_arguments pg_get_function_result
  pg_get_function_identity_arguments pg_get_serial_sequence pg_relation_is_publishable pg_table_is_visible pg_type_is_visible
  pg_function_is_visible pg_operator_is_visible pg_opclass_is_visible pg_opfamily_is_visible pg_collation_is_visible
  pg_conversion_is_visible pg_statistics_obj_is_visible pg_ts_config_is_visible pg_ts_dict_is_visible pg_ts_parser_is_visible
  pg_ts_template_is_visible obj_description col_description shobj_description pg_encoding_to_char`.split(/\s+/),
);

