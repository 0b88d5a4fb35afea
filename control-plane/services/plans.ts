// The plans an account may be on. Plain data with no imports, so the schemas (and through them the
// dashboard's types) can name them without pulling in the services.
export const PLANS = ['free', 'builder', 'platform-admin'] as const;
export type Plan = (typeof PLANS)[number];
