// One error type for everything a caller may see, with a closed catalogue of codes: every front door
// reports a BerthError the same way ({"error": {"code", "message", "details"?}}), and REST answers it
// with the code's HTTP status. Services name the code only. Anything else that escapes is a bug: it is
// logged with the request id and reported as `internal_error`, never with its message or stack.

/** Every code a caller may see, with the HTTP status REST answers it with. */
export const ERROR_CODES = {
  before_history: 422,
  branch_failed: 422,
  branch_not_found: 404,
  bucket_has_site: 409,
  confirmation_code_expired: 400,
  database_not_ready: 409,
  database_unavailable: 503,
  deployment_failed: 422,
  deployment_failed_after_migrations: 422,
  deployment_incomplete: 409,
  deployment_not_open: 409,
  digest_mismatch: 400,
  domain_limit_reached: 422,
  domain_not_verified: 409,
  domain_reserved: 400,
  domain_taken: 409,
  download_link_expired: 403,
  export_in_progress: 409,
  file_not_text: 422,
  file_too_large: 413,
  file_too_large_for_text: 422,
  forbidden: 403,
  function_compile_failed: 422,
  function_crashed: 502,
  function_error: 500,
  function_memory_exceeded: 502,
  function_not_found: 404,
  function_protocol_error: 502,
  function_start_failed: 502,
  function_timeout: 504,
  internal_error: 500,
  invalid_confirmation_code: 400,
  invalid_content_type: 400,
  invalid_credentials: 401,
  invalid_download_link: 403,
  invalid_function_path: 400,
  invalid_hostname: 400,
  invalid_invitation: 400,
  invalid_json: 400,
  invalid_link: 400,
  invalid_migration_name: 400,
  invalid_password: 400,
  invalid_path: 400,
  invalid_request: 400,
  invalid_routing_rules: 422,
  invalid_secret_name: 400,
  invalid_secret_value: 400,
  last_admin: 409,
  llm_invalid_request: 400,
  llm_not_configured: 503,
  llm_provider_error: 502,
  llm_provider_unavailable: 502,
  llm_rate_limited: 429,
  llm_timeout: 504,
  llm_usage_exceeded: 429,
  login_already_approved: 409,
  login_expired: 410,
  metadata_unavailable: 503,
  method_not_allowed: 405,
  migration_failed: 422,
  migration_history_conflict: 409,
  migration_in_progress: 409,
  multiple_statements: 400,
  not_found: 404,
  not_implemented: 501,
  payload_too_large: 413,
  query_not_allowed: 400,
  quota_exceeded: 413,
  registry_unavailable: 503,
  reserved_path: 400,
  restore_point_unavailable: 422,
  runtime_busy: 503,
  site_limit_reached: 422,
  site_not_active: 409,
  storage_unavailable: 503,
  subdomain_reserved: 409,
  subdomain_taken: 409,
  too_many_attempts: 429,
  too_many_open_deployments: 409,
  unauthorized: 401,
  unknown_tool: 404,
  unsupported_media_type: 415,
  version_conflict: 409,
  version_in_use: 409,
  versions_unavailable: 409,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export const isErrorCode = (code: string): code is ErrorCode => Object.hasOwn(ERROR_CODES, code);

export class BerthError extends Error {
  readonly code: ErrorCode;
  readonly details?: Record<string, unknown>;
  /** Records rendered beside the error envelope, e.g. the failed function of a deployment. */
  readonly records?: Record<string, unknown>;

  constructor(code: ErrorCode, message: string, details?: Record<string, unknown>, records?: Record<string, unknown>) {
    super(message);
    this.name = 'BerthError';
    this.code = code;
    if (details !== undefined) this.details = details;
    if (records !== undefined) this.records = records;
  }

  /** The HTTP status of the code, for front doors that speak HTTP. */
  get status(): number {
    return ERROR_CODES[this.code];
  }
}

export const invalid = (message: string, details?: Record<string, unknown>) =>
  new BerthError('invalid_request', message, details);

export const notFound = (what: string) => new BerthError('not_found', `${what} not found`);

export const conflict = (code: ErrorCode, message: string, details?: Record<string, unknown>) =>
  new BerthError(code, message, details);

/** The metadata server did not answer (see db/errors.ts): the request may be sent again shortly. */
export const metadataUnavailable = () =>
  new BerthError('metadata_unavailable', 'the metadata database is not answering; try again shortly');
export const storageUnavailable = () =>
  new BerthError('storage_unavailable', 'the file store is not answering; nothing was stored, try again shortly');
