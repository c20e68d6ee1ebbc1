/**
 * Arguments that name something stored: rule and API key ids, tenant ids.
 * They are checked where they enter, before any service sees them, so that a
 * NUL byte or another control character is refused with BAD_USER_INPUT naming
 * the argument instead of reaching Postgres, which cannot hold a NUL and
 * answers with an error that the caller would only see masked as
 * INTERNAL_SERVER_ERROR (and the log as a stack). Every such argument of a
 * query or mutation is declared with these decorators; a subscription's are
 * checked where its filter is made (event.resolver.ts), with `referenceArgs`.
 */

import { createParameterDecorator, ID } from "type-graphql";
import { LENGTHS } from "../domain/service-limits.js";
import { reference } from "../domain/validation.js";


/** `name: ID!`, checked. */
export function IdArg(name: string) {
  return createParameterDecorator(({ args }) => checked(args[name], name, LENGTHS.id), { arg: { name, typeFunc: () => ID } });
}

/** `tenantId: String` (optional: none means the caller's own tenant, or every tenant for an ADMIN), checked. */
export function TenantIdArg() {
  return createParameterDecorator(({ args }) => checked(args.tenantId, "tenantId", LENGTHS.tenantId), {
    arg: { name: "tenantId", typeFunc: () => String, options: { nullable: true } },
  });
}

/** A subscription's `tenantId` and `ruleId` filters, checked like the decorated arguments. */
export function referenceArgs<T extends { tenantId?: string | null; ruleId?: string | null }>(args: T): T {
  checked(args.tenantId, "tenantId", LENGTHS.tenantId);
  checked(args.ruleId, "ruleId", LENGTHS.id);
  return args;
}

function checked(value: unknown, name: string, max: number): string | null {
  if (value === null || value === undefined) return null;
  return reference(value as string, name, max);
}
