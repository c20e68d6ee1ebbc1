/** Bundles the dashboard into dist/dashboard/ and returns that directory's path. */
export function buildDashboard(): Promise<string>;
