/**
 * Who may do what. Every caller is a Principal: an API key's role and tenant
 * (or the ADMIN_TOKEN bootstrap, an ADMIN). The services ask `authorize`
 * before acting, so no resolver can forget a check.
 *
 *   ADMIN         everything, in every tenant
 *   TENANT_ADMIN  its tenant's rules and keys; may check its tenant's limits
 *   CHECKER       may only check its tenant's limits
 *   VIEWER        reads its tenant's rules and watches its tenant's events
 *
 * Rules of tenant "*" apply to every tenant: any role that reads rules may
 * read them; only an ADMIN changes them. Metrics name every tenant's rules,
 * so only an ADMIN reads them.
 */

import { ForbiddenError } from "./errors.js";
import { ALL_TENANTS } from "./rule.js";

export const ROLES = ["ADMIN", "TENANT_ADMIN", "CHECKER", "VIEWER"] as const;
export type Role = (typeof ROLES)[number];

export type Permission = "checkLimits" | "readRules" | "writeRules" | "manageKeys" | "watchEvents" | "readMetrics";

const GRANTS: Record<Role, readonly Permission[]> = {
  ADMIN: ["checkLimits", "readRules", "writeRules", "manageKeys", "watchEvents", "readMetrics"],
  TENANT_ADMIN: ["checkLimits", "readRules", "writeRules", "manageKeys", "watchEvents"],
  CHECKER: ["checkLimits"],
  VIEWER: ["readRules", "watchEvents"],
};

export interface Principal {
  /** The API key's id, or "bootstrap" for ADMIN_TOKEN. */
  keyId: string;
  tenantId: string;
  role: Role;
}

function isAdmin(principal: Principal): boolean {
  return principal.role === "ADMIN";
}

/** Whether the principal's role carries the permission at all (in which tenants, `may` says). */
export function holds(principal: Principal, permission: Permission): boolean {
  return GRANTS[principal.role].includes(permission);
}

export function may(principal: Principal, permission: Permission, tenantId: string): boolean {
  if (!holds(principal, permission)) return false;
  if (isAdmin(principal) || tenantId === principal.tenantId) return true;
  return tenantId === ALL_TENANTS && permission === "readRules";
}

/** Throws FORBIDDEN unless the principal may do this in this tenant. */
export function authorize(principal: Principal, permission: Permission, tenantId: string): void {
  if (!may(principal, permission, tenantId)) {
    throw new ForbiddenError(
      holds(principal, permission)
        ? `this API key (${principal.role} of tenant ${JSON.stringify(principal.tenantId)}) cannot act on tenant ${JSON.stringify(tenantId)}`
        : `this API key's role ${principal.role} does not allow ${permission}`,
    );
  }
}

/**
 * The tenant a listing or a subscription is about: what the caller asked for
 * if it may see it, its own tenant when it asked for none; an ADMIN asking for
 * none sees every tenant (null).
 */
export function scopeTenant(principal: Principal, permission: Permission, requested: string | null | undefined): string | null {
  if (requested === null || requested === undefined) {
    authorize(principal, permission, principal.tenantId);
    return isAdmin(principal) ? null : principal.tenantId;
  }
  authorize(principal, permission, requested);
  return requested;
}
