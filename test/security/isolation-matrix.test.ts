/**
 * Tenant isolation, operation by operation. Every root field of schema.graphql
 * is called by every role of tenant A (and, mirrored, of tenant B), by the
 * bootstrap ADMIN and with no token, on the caller's own tenant, the other
 * tenant, tenant "*", no tenant at all and ids nobody has. Each cell of the
 * matrix states its outcome. A refused call must have changed nothing (every
 * rule, every API key and the watched buckets are read back as ADMIN before
 * and after); an allowed one exactly what it asked for.
 *
 * Then the promises of README "Access" one by one: another tenant's ids answer
 * like unknown ids, batches mixing tenants are refused whole with nothing
 * counted, "*" rules keep each tenant's counts apart, subscriptions deliver the
 * caller's tenant only.
 */

import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { buildSchema, print, type GraphQLFormattedError } from "graphql";
import { createClient, type Client } from "graphql-ws";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { parse as parseYaml } from "yaml";
import {
  AddListEntryDocument,
  AdminSnapshotDocument,
  ApiKeysDocument,
  CheckLeaseDocument,
  BanDocument,
  BanEventsDocument,
  BansDocument,
  CheckLimitsBatchDocument,
  CheckLimitsDocument,
  CheckSingleThenBatchDocument,
  CheckTwoAliasedDocument,
  CreateApiKeyDocument,
  CreateRuleDocument,
  DeleteOverrideDocument,
  DeleteRuleDocument,
  GetRuleDocument,
  HealthDocument,
  ExportRulesDocument,
  ImportRulesDocument,
  InvalidationsDocument,
  ListEntriesDocument,
  ListEntryHistoryDocument,
  ListRulesDocument,
  NearLimitEventsDocument,
  OverridesDocument,
  PromoteRuleDocument,
  ReleaseLeaseDocument,
  RemoveListEntryDocument,
  ResetLimitDocument,
  RollbackRuleDocument,
  RuleHistoryDocument,
  RuleUsageDocument,
  RevokeApiKeyDocument,
  RuleChangesDocument,
  SetOverrideDocument,
  ThrottleEventsDocument,
  TopBucketsDocument,
  UnbanDocument,
  UpdateRuleDocument,
  type AdminSnapshotQuery,
  type BanFieldsFragment,
  type CheckLimitsInput,
  type CreateRuleInput,
  type ListEntryFieldsFragment,
  type OverrideFieldsFragment,
  type RuleFieldsFragment,
} from "../generated/graphql.js";
import { expectNoStackTrace, realStorageAvailable } from "../support/api.js";
import { startTestApp, type Storage } from "../support/app.js";
import type { TestApp } from "../harness/in-process-app.js";
import { GraphQLClient, type GraphQLResponse } from "../harness/graphql-client.js";

const storage: Storage = (await realStorageAvailable()) ? "real" : "embedded";

// ---------------------------------------------------------------------------
// The matrix
// ---------------------------------------------------------------------------

type Role = "ADMIN" | "TENANT_ADMIN" | "CHECKER" | "VIEWER";
/** NONE: no Authorization at all. */
type Who = Role | "NONE";
type Outcome = "ok" | "null" | "FORBIDDEN" | "NOT_FOUND" | "BAD_USER_INPUT" | "UNAUTHENTICATED";
/**
 * What a cell acts on, seen from the caller's home tenant (A, or B for the mirrored half):
 *   own      its home tenant (a rule, key or bucket of it, or tenantId: home)
 *   other    the other tenant
 *   global   tenant "*" (a "*" rule; for keys an ADMIN key, which only "*" holds)
 *   omitted  no tenantId argument
 *   unknown  an id that no rule or key has
 *   mixed    a batch with one check of each tenant; a rules file with one rule of each
 *   empty    a rules file with no rules: it names no tenant
 */
type Target = "own" | "other" | "global" | "omitted" | "unknown" | "mixed" | "empty";

const WHO: readonly Who[] = ["ADMIN", "TENANT_ADMIN", "CHECKER", "VIEWER", "NONE"];
const ok = "ok";
const nul = "null";
const F = "FORBIDDEN";
const NF = "NOT_FOUND";
const BAD = "BAD_USER_INPUT";
const U = "UNAUTHENTICATED";

/** One row: the outcome for ADMIN, TENANT_ADMIN, CHECKER, VIEWER and no token, in that order. */
function row(admin: Outcome, tenantAdmin: Outcome, checker: Outcome, viewer: Outcome, none: Outcome): Record<Who, Outcome> {
  return { ADMIN: admin, TENANT_ADMIN: tenantAdmin, CHECKER: checker, VIEWER: viewer, NONE: none };
}

/**
 * Expected outcomes. "null" is a query answering null (rule(id) for a rule the
 * caller may not see). A CHECKER may not read rules, so a rule of its own
 * tenant does not exist for it (null, NOT_FOUND); a VIEWER may read it, so
 * changing it is FORBIDDEN. Another tenant's ids are NOT_FOUND for every role.
 * A role without the right an operation needs is FORBIDDEN even when the
 * operation would change nothing (importRules of an empty file).
 */
const MATRIX = {
  //                                 ADMIN  TENANT_ADMIN CHECKER VIEWER  no token
  rule: {
    own: /*                     */ row(ok, ok, nul, ok, U),
    other: /*                   */ row(ok, nul, nul, nul, U),
    global: /*                  */ row(ok, ok, nul, ok, U),
    unknown: /*                 */ row(nul, nul, nul, nul, U),
  },
  rules: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, ok, F, ok, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  checkLimits: {
    own: /*                     */ row(ok, ok, ok, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(BAD, BAD, BAD, BAD, U),
  },
  checkLimitsBatch: {
    own: /*                     */ row(ok, ok, ok, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(BAD, BAD, BAD, BAD, U),
    mixed: /*                   */ row(ok, F, F, F, U),
  },
  apiKeys: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, F, F, U),
  },
  createRule: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
  },
  updateRule: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  deleteRule: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  resetLimit: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  createApiKey: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*  an ADMIN key    */ row(ok, F, F, F, U),
  },
  revokeApiKey: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*  an ADMIN key    */ row(ok, NF, NF, NF, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  throttleEvents: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  ruleChanges: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  invalidations: {
    own: /*                     */ row(ok, ok, ok, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, ok, F, U),
  },
  nearLimitEvents: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  ruleHistory: {
    own: /*                     */ row(ok, ok, NF, ok, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, ok, NF, ok, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  exportRules: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, ok, F, ok, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  importRules: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    mixed: /*                   */ row(ok, F, F, F, U),
    empty: /*                   */ row(ok, ok, F, F, U),
  },
  rollbackRule: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  promoteRule: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  // An override is its rule's: read as the rule is read (a CHECKER does not see it), changed as the rule is changed.
  overrides: {
    own: /*                     */ row(ok, ok, NF, ok, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, ok, NF, ok, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  setOverride: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  // A lease is its check's tenant's: another tenant's (or a "*" rule's, taken by the other tenant) answers false, like an unknown one.
  releaseLease: {
    own: /*                     */ row(ok, ok, ok, F, U),
    other: /*                   */ row(ok, ok, ok, F, U),
    global: /*                  */ row(ok, ok, ok, F, U),
    unknown: /*                 */ row(ok, ok, ok, F, U),
  },
  deleteOverride: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  // Usage is watched like events: a CHECKER may not, whatever the rule (one answer for every id, so none is told apart).
  ruleUsage: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, NF, F, NF, U),
    global: /*                  */ row(ok, ok, F, ok, U),
    unknown: /*                 */ row(NF, NF, F, NF, U),
  },
  topBuckets: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  health: {
    omitted: /*                 */ row(ok, ok, ok, ok, U),
  },
  // Access lists are read and changed as rules are: "*" lists read by every reader, changed by an ADMIN only.
  listEntries: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, ok, F, ok, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  listEntryHistory: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, ok, F, ok, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  addListEntry: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
  },
  removeListEntry: {
    own: /*                     */ row(ok, ok, NF, F, U),
    other: /*                   */ row(ok, NF, NF, NF, U),
    global: /*                  */ row(ok, F, NF, F, U),
    unknown: /*                 */ row(NF, NF, NF, NF, U),
  },
  // Bans are changed as rules are and read as rules are; "*" holds none (a ban refuses one tenant's requests).
  ban: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(BAD, F, F, F, U),
  },
  // Lifting is idempotent: another tenant's ban, like an unknown id, answers false (ok) and changes nothing.
  unban: {
    own: /*                     */ row(ok, ok, F, F, U),
    other: /*                   */ row(ok, ok, F, F, U),
    unknown: /*                 */ row(ok, ok, F, F, U),
  },
  bans: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, ok, F, ok, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
  banEvents: {
    own: /*                     */ row(ok, ok, F, ok, U),
    other: /*                   */ row(ok, F, F, F, U),
    global: /*                  */ row(ok, F, F, F, U),
    omitted: /*                 */ row(ok, ok, F, ok, U),
  },
} satisfies Record<string, Partial<Record<Target, Record<Who, Outcome>>>>;

type Operation = keyof typeof MATRIX;
type Home = "A" | "B";

interface Cell {
  name: string;
  op: Operation;
  who: Who;
  home: Home;
  target: Target;
  expected: Outcome;
}

const CELLS: Cell[] = (Object.entries(MATRIX) as [Operation, Partial<Record<Target, Record<Who, Outcome>>>][]).flatMap(([op, targets]) =>
  (Object.entries(targets) as [Target, Record<Who, Outcome>][]).flatMap(([target, outcomes]) =>
    (["A", "B"] as const).flatMap((home) =>
      WHO.map((who) => ({
        name: `${op} on ${target === "omitted" ? "no tenantId" : target === "empty" ? "an empty rules file" : `${target} target`}, as ${who === "NONE" ? "no token" : who} of tenant ${home}: ${outcomes[who]}`,
        op,
        who,
        home,
        target,
        expected: outcomes[who],
      })),
    ),
  ),
);

function rootFieldsOfSchema(): string[] {
  const schema = buildSchema(readFileSync(new URL("../../schema.graphql", import.meta.url), "utf8"));
  return [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].flatMap((type) => Object.keys(type?.getFields() ?? {}));
}

// ---------------------------------------------------------------------------
// Reading state back as ADMIN
// ---------------------------------------------------------------------------

type ApiKeyRow = AdminSnapshotQuery["apiKeys"][number];

/** Everything a refused call must leave alone: rules, keys, access list entries and live bans by id, bucket remaining by "ruleId key", the watched rules' overrides by id. */
interface Snapshot {
  rules: Record<string, RuleFieldsFragment>;
  keys: Record<string, ApiKeyRow>;
  entries: Record<string, ListEntryFieldsFragment>;
  buckets: Record<string, number>;
  overrides: Record<string, OverrideFieldsFragment>;
  bans: Record<string, BanFieldsFragment>;
}

const bucket = (ruleId: string, key: string) => `${ruleId} ${key}`;

/** The fixture user every check of the matrix counts against, on the fixture rules' resource. */
const FIXTURE_USER = "fixture-user";
const FIXTURE_KEY = `user:${FIXTURE_USER}`;

interface Socket {
  client: Client;
  closeCode: number | null;
}

interface Subscription<E> {
  events: E[];
  errors: GraphQLFormattedError[];
  done: boolean;
}

interface TenantEvent {
  tenantId: string;
  ruleId: string;
}

describe(`tenant isolation over the API (${storage} storage)`, () => {
  let t: TestApp;
  let admin: GraphQLClient;
  const T: Record<Home, string> = { A: `tenant-a-${randomUUID().slice(0, 8)}`, B: `tenant-b-${randomUUID().slice(0, 8)}` };
  const otherHome = (home: Home): Home => (home === "A" ? "B" : "A");
  /** The secrets of the keys each tenant's roles call with. */
  const secrets = {} as Record<Home, Record<Exclude<Role, "ADMIN">, string>>;
  const keyIds = {} as Record<Home, string[]>;
  /** Per tenant: /api/** counted per user (what the matrix's checks count against). */
  const fixtureRule = {} as Record<string, string>;
  /** Per tenant: /deny/** limit 1 per user: a check of cost 2 is denied (a throttle event) and counts nothing. */
  const denyRule = {} as Record<string, string>;
  /** Per tenant: /near/** limit 10 per user: a check of cost 10 is admitted and leaves the bucket nearly spent (a near-limit event). */
  const nearRule = {} as Record<string, string>;
  /** Per tenant and for "*": /churn/**, updated to produce rule changes. */
  const churnRule = {} as Record<string, string>;
  /** Tenant "*": /shared/** counted per user, so per tenant and user. */
  let globalRule: string;
  let globalAdminKeyId: string;
  let churned = 0;
  const sockets: Client[] = [];
  /** Rules made for one test only; deleted after it, so that every listing and export stays small. */
  const scratch = new Set<string>();
  /** Access list entries made for one test only; removed after it. */
  const scratchEntries = new Set<string>();

  beforeAll(async () => {
    t = await startTestApp(storage, { ADMIN_MUTATIONS_PER_MINUTE: "1000000" });
    admin = t.client;
    for (const home of ["A", "B"] as const) {
      const tenantId = T[home];
      secrets[home] = {} as Record<Exclude<Role, "ADMIN">, string>;
      keyIds[home] = [];
      for (const role of ["TENANT_ADMIN", "CHECKER", "VIEWER"] as const) {
        const { createApiKey } = await admin.data(CreateApiKeyDocument, { input: { tenantId, role, name: `${role} of ${home}` } });
        secrets[home][role] = createApiKey.secret;
        keyIds[home].push(createApiKey.apiKey.id);
      }
      fixtureRule[tenantId] = (await createRule({ tenantId, name: "fixture", resource: "/api/**", limit: 100_000 })).id;
      denyRule[tenantId] = (await createRule({ tenantId, name: "deny", resource: "/deny/**", limit: 1 })).id;
      nearRule[tenantId] = (await createRule({ tenantId, name: "near", resource: "/near/**", limit: 10 })).id;
    }
    for (const tenantId of [T.A, T.B, "*"]) churnRule[tenantId] = (await createRule({ tenantId, name: "churn", resource: "/churn/**", limit: 1 })).id;
    globalRule = (await createRule({ tenantId: "*", name: "shared", resource: "/shared/**", limit: 100_000 })).id;
    globalAdminKeyId = (await admin.data(CreateApiKeyDocument, { input: { tenantId: "*", role: "ADMIN", name: "fixture admin" } })).createApiKey.apiKey.id;
  });

  afterAll(async () => {
    await Promise.all(sockets.map((client) => client.dispose()));
    await t?.stop();
  });

  // -- helpers ---------------------------------------------------------------

  /**
   * A rule keyed by user, counted exactly (a sliding log over a day), so that
   * `remaining` stays put between two reads unless something counts.
   */
  async function createRule(input: Partial<CreateRuleInput> & { tenantId: string; name: string }) {
    const full: CreateRuleInput = { scope: ["USER"], algorithm: "SLIDING_WINDOW_LOG", limit: 10, window: 1, windowUnit: "DAYS", ...input };
    return (await admin.data(CreateRuleDocument, { input: { ...full, name: `${full.name}-${randomUUID().slice(0, 8)}` } })).createRule;
  }

  /** A fresh rule to be changed by one cell, on a resource nothing else checks. */
  async function victimRule(tenantId: string, extra: Partial<CreateRuleInput> = {}) {
    const base = `/victim/${randomUUID()}`;
    const rule = await createRule({ tenantId, name: "victim", resource: `${base}/**`, ...extra });
    scratch.add(rule.id);
    return { id: rule.id, resource: `${base}/x` };
  }

  /** The bucket of user "v" in a victim rule, counted from the cell's home tenant: under it for a "*" rule. */
  function victimBucket(cell: Cell, ruleTenant: string, resource: string) {
    const bucketTenant = ruleTenant === "*" ? T[cell.home] : ruleTenant;
    const prefix = ruleTenant === "*" ? `tenant:${bucketTenant}|` : "";
    return { use: { tenantId: bucketTenant, userId: "v", resource }, key: `${prefix}user:v`, prefix };
  }

  /** The override every override cell sets or finds: user "v" of the victim rule (limit 10) limited to 3. */
  const VICTIM_OVERRIDE = { dimension: "USER", identifier: "v", limit: 3 } as const;
  /** What the snapshot's dry run reads of an unused bucket under a limit: what one check would leave. */
  const unusedUnder = (limit: number) => limit - 1;

  /**
   * What an override cell acts on: a victim rule of the target's tenant (none for "unknown") and the
   * bucket its override names; with `existing`, the override already set.
   */
  async function overrideVictim(cell: Cell, existing: boolean) {
    if (cell.target === "unknown") return { ruleId: randomUUID(), overrideId: randomUUID(), key: "", watch: [] as CheckLimitsInput[], rules: [] as string[] };
    const victim = await victimRule(tenantOf(cell));
    const { use, key } = victimBucket(cell, tenantOf(cell), victim.resource);
    const overrideId = existing ? (await admin.data(SetOverrideDocument, { input: { ruleId: victim.id, ...VICTIM_OVERRIDE } })).setOverride.id : "";
    return { ruleId: victim.id, overrideId, key, watch: [use], rules: [victim.id] };
  }

  /** `before` with one rule at its next version and nothing else of it changed, as setting or deleting one of its overrides leaves it. */
  function nextVersion(before: Snapshot, after: Snapshot, ruleId: string): Snapshot {
    const expected = structuredClone(before);
    const rule = before.rules[ruleId]!;
    expected.rules[ruleId] = { ...rule, version: rule.version + 1, updatedAt: after.rules[ruleId]!.updatedAt };
    return expected;
  }

  /** A fresh deny list entry of the tenant (a user nobody checks as), removed after the test. */
  async function listEntryOf(tenantId: string): Promise<string> {
    const value = `victim-${randomUUID().slice(0, 8)}`;
    const { id } = (await admin.data(AddListEntryDocument, { input: { tenantId, list: "DENY", kind: "USER", value } })).addListEntry;
    scratchEntries.add(id);
    return id;
  }

  async function victimKey(tenantId: string) {
    const role = tenantId === "*" ? "ADMIN" : "CHECKER";
    const { createApiKey } = await admin.data(CreateApiKeyDocument, { input: { tenantId, role, name: "victim" } });
    return createApiKey.apiKey.id;
  }

  function clientFor(who: Who, home: Home): GraphQLClient {
    if (who === "ADMIN") return admin;
    if (who === "NONE") return new GraphQLClient(t.app.url);
    return new GraphQLClient(t.app.url, secrets[home][who]);
  }

  function tokenFor(who: Who, home: Home): string | undefined {
    if (who === "ADMIN") return t.adminToken;
    if (who === "NONE") return undefined;
    return secrets[home][who];
  }

  /** The tenant a cell's target names. */
  function tenantOf(cell: Pick<Cell, "home" | "target">): string {
    if (cell.target === "global") return "*";
    if (cell.target === "other") return T[otherHome(cell.home)];
    return T[cell.home];
  }

  const fixtureCheck = (tenantId: string, extra: Partial<CheckLimitsInput> = {}): CheckLimitsInput => ({
    tenantId,
    userId: FIXTURE_USER,
    resource: "/api/x",
    ...extra,
  });

  /** The buckets every cell watches: each tenant's fixture bucket and its "*" bucket. */
  function fixtureWatch(): CheckLimitsInput[] {
    return [T.A, T.B].flatMap((tenantId) => [fixtureCheck(tenantId, { dryRun: true }), fixtureCheck(tenantId, { resource: "/shared/x", dryRun: true })]);
  }

  async function snapshot(watch: CheckLimitsInput[] = fixtureWatch(), overridesOf: string[] = []): Promise<Snapshot> {
    const data = await adminSnapshot(watch);
    const buckets: Record<string, number> = {};
    for (const decision of data.checkLimitsBatch) for (const r of decision.results) buckets[bucket(r.rule.id, r.key)] = r.remaining;
    const overrides: Record<string, OverrideFieldsFragment> = {};
    for (const ruleId of overridesOf) {
      const page = (await admin.data(OverridesDocument, { ruleId, first: 1000 })).overrides;
      expect(page.hasNextPage).toBe(false);
      for (const override of page.items) overrides[override.id] = override;
    }
    return {
      rules: Object.fromEntries(data.rules.map((rule) => [rule.id, rule])),
      keys: Object.fromEntries(data.apiKeys.map((key) => [key.id, key])),
      entries: Object.fromEntries(data.listEntries.map((entry) => [entry.id, entry])),
      buckets,
      overrides,
      bans: Object.fromEntries(data.bans.map((ban) => [ban.id, ban])),
    };
  }

  /**
   * The admin's view, its watched buckets read by dry runs. A degraded decision
   * is a failure mode's answer (a Redis call past its deadline on a loaded
   * machine: OPEN reads every bucket as full), not the bucket's state, so the
   * dry runs are read again until Redis answers them (they count nothing).
   */
  async function adminSnapshot(watch: CheckLimitsInput[]) {
    for (let attempt = 1; ; attempt++) {
      const data = await admin.data(AdminSnapshotDocument, { watch: watch.map((request) => ({ ...request, dryRun: true })) });
      if (!data.checkLimitsBatch.some((decision) => decision.degraded)) return data;
      if (attempt === 20) throw new Error("the watched buckets were read degraded 20 times in a row: Redis is not answering");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** What a response says: its first error's code, else whether the field came back null. */
  function outcomeOf(errors: readonly GraphQLFormattedError[] | undefined, value: unknown): string {
    if (errors !== undefined && errors.length > 0) {
      const code = errors[0]!.extensions?.code;
      return typeof code === "string" ? code : `an error without extensions.code: ${JSON.stringify(errors[0]!.message)}`;
    }
    return value === null || value === undefined ? "null" : "ok";
  }

  async function remainingOf(tenantId: string, userId: string, resource = "/api/x"): Promise<number[]> {
    const { checkLimits } = await admin.data(CheckLimitsDocument, { request: { tenantId, userId, resource, dryRun: true } });
    return checkLimits.results.map((r) => r.remaining);
  }

  async function waitUntil(condition: () => boolean, what: string): Promise<void> {
    for (let i = 0; i < 500; i++) {
      if (condition()) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    throw new Error(`gave up waiting for ${what}`);
  }

  // -- HTTP cells ------------------------------------------------------------

  interface HttpCell<P, D, V> {
    /** Runs as ADMIN before anything is read: the fresh rule or key this cell acts on. */
    prepare: () => Promise<P>;
    send: (client: GraphQLClient, p: P) => Promise<GraphQLResponse<D>>;
    pick: (data: D) => V;
    /** Buckets beyond the fixtures' that this cell could change. */
    watch?: (p: P) => CheckLimitsInput[];
    /** Rules whose overrides this cell could change. */
    overridesOf?: (p: P) => string[];
    /** For an allowed call: checks the answer, and returns the state it must have left (from `before`). */
    allowed: (value: NonNullable<V>, p: P, before: Snapshot, after: Snapshot) => Snapshot;
  }

  async function runHttpCell<P, D, V>(cell: Cell, spec: HttpCell<P, D, V>): Promise<void> {
    const p = await spec.prepare();
    const watch = [...fixtureWatch(), ...(spec.watch?.(p) ?? [])];
    const overridesOf = spec.overridesOf?.(p) ?? [];
    const before = await snapshot(watch, overridesOf);
    const response = await spec.send(clientFor(cell.who, cell.home), p);
    expectNoStackTrace(response);
    const value = response.data ? spec.pick(response.data) : null;
    expect(outcomeOf(response.errors, value), JSON.stringify(response.errors)).toBe(cell.expected);
    if (cell.expected === "UNAUTHENTICATED") expect(response.status).toBe(401);
    const after = await snapshot(watch, overridesOf);
    const expected = cell.expected === "ok" ? spec.allowed(value!, p, before, after) : before;
    expect(after).toEqual(expected);
  }

  /** The snapshot with the fixture bucket of each tenant counted down once per check. */
  function counted(before: Snapshot, tenants: string[]): Snapshot {
    const expected = structuredClone(before);
    for (const tenantId of tenants) expected.buckets[bucket(fixtureRule[tenantId]!, FIXTURE_KEY)]! -= 1;
    return expected;
  }

  function expectDecisionFor(decision: { results: { rule: { id: string }; key: string }[] }, tenantId: string): void {
    expect(decision.results.map((r) => [r.rule.id, r.key])).toEqual([[fixtureRule[tenantId], FIXTURE_KEY]]);
  }

  const ruleIdFor = async (cell: Cell, victim: boolean): Promise<string> => {
    if (cell.target === "unknown") return randomUUID();
    if (victim) return (await victimRule(tenantOf(cell))).id;
    return cell.target === "global" ? globalRule : fixtureRule[tenantOf(cell)]!;
  };

  const HTTP_DRIVERS: Record<Exclude<Operation, EventOperation>, (cell: Cell) => Promise<void>> = {
    rule: (cell) =>
      runHttpCell(cell, {
        prepare: () => ruleIdFor(cell, false),
        send: (client, id) => client.request(GetRuleDocument, { id }),
        pick: (data) => data.rule,
        allowed: (rule, id, before) => {
          expect(rule).toMatchObject({ id, tenantId: tenantOf(cell) });
          return before;
        },
      }),

    rules: (cell) =>
      runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(ListRulesDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.rules,
        allowed: (rules, _p, before) => {
          const ids = rules.map((r) => r.id);
          if (cell.target === "omitted" && cell.who === "ADMIN") {
            expect(ids).toEqual(expect.arrayContaining([fixtureRule[T.A], fixtureRule[T.B], globalRule]));
          } else {
            const tenantId = tenantOf(cell);
            expect(new Set(rules.map((r) => r.tenantId))).toEqual(new Set([tenantId]));
            expect(ids).toContain(tenantId === "*" ? globalRule : fixtureRule[tenantId]);
          }
          return before;
        },
      }),

    checkLimits: (cell) =>
      runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(CheckLimitsDocument, { request: fixtureCheck(tenantOf(cell)) }),
        pick: (data) => data.checkLimits,
        allowed: (decision, _p, before) => {
          expectDecisionFor(decision, tenantOf(cell));
          return counted(before, [tenantOf(cell)]);
        },
      }),

    checkLimitsBatch: (cell) => {
      const tenants = cell.target === "mixed" ? [T[cell.home], T[otherHome(cell.home)]] : [tenantOf(cell)];
      return runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(CheckLimitsBatchDocument, { requests: tenants.map((tenantId) => fixtureCheck(tenantId)) }),
        pick: (data) => data.checkLimitsBatch,
        allowed: (decisions, _p, before) => {
          expect(decisions).toHaveLength(tenants.length);
          decisions.forEach((decision, i) => expectDecisionFor(decision, tenants[i]!));
          return counted(before, tenants);
        },
      });
    },

    apiKeys: (cell) =>
      runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(ApiKeysDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.apiKeys,
        allowed: (keys, _p, before) => {
          const ids = keys.map((k) => k.id);
          if (cell.target === "omitted" && cell.who === "ADMIN") {
            expect(ids).toEqual(expect.arrayContaining([...keyIds.A, ...keyIds.B, globalAdminKeyId]));
          } else {
            const tenantId = tenantOf(cell);
            expect(new Set(keys.map((k) => k.tenantId))).toEqual(new Set([tenantId]));
            expect(ids).toEqual(expect.arrayContaining(tenantId === "*" ? [globalAdminKeyId] : keyIds[tenantId === T.A ? "A" : "B"]));
          }
          return before;
        },
      }),

    createRule: (cell) =>
      runHttpCell(cell, {
        prepare: async () => `created-${randomUUID().slice(0, 8)}`,
        send: (client, name) =>
          client.request(CreateRuleDocument, {
            input: { tenantId: tenantOf(cell), name, scope: ["USER"], resource: `/victim/${randomUUID()}/**`, limit: 10, window: 1, windowUnit: "DAYS" },
          }),
        pick: (data) => data.createRule,
        allowed: (rule, name, before) => {
          expect(rule).toMatchObject({ tenantId: tenantOf(cell), name, version: 1 });
          const expected = structuredClone(before);
          expected.rules[rule.id] = rule;
          return expected;
        },
      }),

    updateRule: (cell) =>
      runHttpCell(cell, {
        prepare: () => ruleIdFor(cell, true),
        send: (client, id) => client.request(UpdateRuleDocument, { id, input: { limit: 77 } }),
        pick: (data) => data.updateRule,
        allowed: (rule, id, before) => {
          expect(rule).toMatchObject({ id, tenantId: tenantOf(cell), limit: 77, version: before.rules[id]!.version + 1 });
          const expected = structuredClone(before);
          expected.rules[id] = rule;
          return expected;
        },
      }),

    deleteRule: (cell) =>
      runHttpCell(cell, {
        prepare: () => ruleIdFor(cell, true),
        send: (client, id) => client.request(DeleteRuleDocument, { id }),
        pick: (data) => data.deleteRule,
        allowed: (deleted, id, before) => {
          expect(deleted).toBe(true);
          const expected = structuredClone(before);
          delete expected.rules[id];
          return expected;
        },
      }),

    resetLimit: (cell) =>
      runHttpCell(cell, {
        // A victim rule with a bucket counted 3 times for real; a "*" rule's bucket is the home tenant's.
        prepare: async () => {
          if (cell.target === "unknown") return { ruleId: randomUUID(), key: "user:v", freshKey: "user:fresh", watch: [] as CheckLimitsInput[] };
          const victim = await victimRule(tenantOf(cell));
          const { use, key, prefix } = victimBucket(cell, tenantOf(cell), victim.resource);
          for (let i = 0; i < 3; i++) await admin.data(CheckLimitsDocument, { request: use });
          return { ruleId: victim.id, key, freshKey: `${prefix}user:fresh`, watch: [use, { ...use, userId: "fresh" }] };
        },
        watch: (p) => p.watch,
        send: (client, p) => client.request(ResetLimitDocument, { ruleId: p.ruleId, key: p.key }),
        pick: (data) => data.resetLimit,
        allowed: (reset, p, before) => {
          expect(reset).toBe(true);
          const fresh = before.buckets[bucket(p.ruleId, p.freshKey)]!;
          expect(before.buckets[bucket(p.ruleId, p.key)]).toBe(fresh - 3);
          const expected = structuredClone(before);
          expected.buckets[bucket(p.ruleId, p.key)] = fresh;
          return expected;
        },
      }),

    createApiKey: (cell) =>
      runHttpCell(cell, {
        prepare: async () => `key-${randomUUID().slice(0, 8)}`,
        send: (client, name) =>
          client.request(CreateApiKeyDocument, { input: { tenantId: tenantOf(cell), role: cell.target === "global" ? "ADMIN" : "CHECKER", name } }),
        pick: (data) => data.createApiKey,
        allowed: (created, name, before) => {
          expect(created.apiKey).toMatchObject({ tenantId: tenantOf(cell), name, revokedAt: null });
          const expected = structuredClone(before);
          expected.keys[created.apiKey.id] = created.apiKey;
          return expected;
        },
      }),

    revokeApiKey: (cell) =>
      runHttpCell(cell, {
        prepare: () => (cell.target === "unknown" ? Promise.resolve(randomUUID()) : victimKey(tenantOf(cell))),
        send: (client, id) => client.request(RevokeApiKeyDocument, { id }),
        pick: (data) => data.revokeApiKey,
        allowed: (revoked, id, before, after) => {
          expect(revoked).toBe(true);
          expect(after.keys[id]?.revokedAt).not.toBeNull();
          const expected = structuredClone(before);
          expected.keys[id] = { ...before.keys[id]!, revokedAt: after.keys[id]!.revokedAt };
          return expected;
        },
      }),

    ruleHistory: (cell) =>
      runHttpCell(cell, {
        prepare: () => ruleIdFor(cell, false),
        send: (client, id) => client.request(RuleHistoryDocument, { id }),
        pick: (data) => data.ruleHistory,
        allowed: (revisions, id, before) => {
          expect(revisions.length).toBeGreaterThan(0);
          expect(revisions.map((r) => [r.ruleId, r.tenantId])).toEqual(revisions.map(() => [id, tenantOf(cell)]));
          return before;
        },
      }),

    ruleUsage: (cell) =>
      runHttpCell(cell, {
        prepare: () => ruleIdFor(cell, false),
        send: (client, ruleId) => client.request(RuleUsageDocument, { ruleId }),
        pick: (data) => data.ruleUsage,
        allowed: (points, _id, before) => {
          expect(points.length).toBeGreaterThan(0);
          return before;
        },
      }),

    topBuckets: (cell) =>
      runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(TopBucketsDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.topBuckets,
        allowed: (buckets, _p, before) => {
          if (cell.target === "omitted" && cell.who === "ADMIN") return before;
          for (const bucket of buckets) expect(bucket.tenantId).toBe(tenantOf(cell));
          return before;
        },
      }),

    health: (cell) =>
      runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(HealthDocument, {}),
        pick: (data) => data.health,
        allowed: (health, _p, before) => {
          expect(health.rules.source).toBe("database");
          return before;
        },
      }),

    listEntries: (cell) =>
      runHttpCell(cell, {
        prepare: () => listEntryOf(tenantOf(cell)),
        send: (client) => client.request(ListEntriesDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.listEntries,
        allowed: (entries, id, before) => {
          if (cell.target === "omitted" && cell.who === "ADMIN") {
            expect(entries.map((e) => e.id)).toContain(id);
          } else {
            expect(new Set(entries.map((e) => e.tenantId))).toEqual(new Set([tenantOf(cell)]));
            expect(entries.map((e) => e.id)).toContain(id);
          }
          return before;
        },
      }),

    listEntryHistory: (cell) =>
      runHttpCell(cell, {
        prepare: () => listEntryOf(tenantOf(cell)),
        send: (client) => client.request(ListEntryHistoryDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.listEntryHistory,
        allowed: (changes, id, before) => {
          // No tenantId: the caller's own tenant, which for the bootstrap ADMIN is "*".
          const tenantId = cell.target !== "omitted" ? tenantOf(cell) : cell.who === "ADMIN" ? "*" : T[cell.home];
          for (const change of changes) expect(change.entry.tenantId).toBe(tenantId);
          if (tenantId === tenantOf(cell)) expect(changes.map((c) => c.entry.id)).toContain(id);
          return before;
        },
      }),

    addListEntry: (cell) =>
      runHttpCell(cell, {
        prepare: async () => `victim-${randomUUID().slice(0, 8)}`,
        send: (client, value) => client.request(AddListEntryDocument, { input: { tenantId: tenantOf(cell), list: "DENY", kind: "USER", value } }),
        pick: (data) => data.addListEntry,
        allowed: (entry, value, before) => {
          expect(entry).toMatchObject({ tenantId: tenantOf(cell), list: "DENY", kind: "USER", value });
          const expected = structuredClone(before);
          expected.entries[entry.id] = entry;
          scratchEntries.add(entry.id);
          return expected;
        },
      }),

    removeListEntry: (cell) =>
      runHttpCell(cell, {
        prepare: () => (cell.target === "unknown" ? Promise.resolve(randomUUID()) : listEntryOf(tenantOf(cell))),
        send: (client, id) => client.request(RemoveListEntryDocument, { id }),
        pick: (data) => data.removeListEntry,
        allowed: (removed, id, before) => {
          expect(removed).toBe(true);
          const expected = structuredClone(before);
          delete expected.entries[id];
          return expected;
        },
      }),

    exportRules: (cell) =>
      runHttpCell(cell, {
        prepare: async () => undefined,
        send: (client) => client.request(ExportRulesDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.exportRules,
        allowed: (yaml, _p, before) => {
          const tenants = new Set((parseYaml(yaml) as { rules: { tenantId: string }[] }).rules.map((r) => r.tenantId));
          if (cell.target === "omitted" && cell.who === "ADMIN") {
            expect([...tenants]).toEqual(expect.arrayContaining([T.A, T.B, "*"]));
          } else {
            expect(tenants).toEqual(new Set([tenantOf(cell)]));
            for (const tenantId of [T.A, T.B]) if (tenantId !== tenantOf(cell)) expect(yaml).not.toContain(tenantId);
          }
          return before;
        },
      }),

    importRules: (cell) => {
      const tenants = { own: [T[cell.home]], other: [T[otherHome(cell.home)]], global: ["*"], mixed: [T[cell.home], T[otherHome(cell.home)]], empty: [] }[
        cell.target as "own" | "other" | "global" | "mixed" | "empty"
      ];
      return runHttpCell(cell, {
        prepare: async () => tenants.map((tenantId) => ({ tenantId, name: `imported-${randomUUID().slice(0, 8)}` })),
        send: (client, entries) => client.request(ImportRulesDocument, { yaml: rulesFile(entries) }),
        pick: (data) => data.importRules,
        allowed: (report, entries, before, after) => {
          expect(report).toMatchObject({ applied: true, updated: [], unchanged: [], invalid: [] });
          expect(report.created.map((r) => [r.tenantId, r.name])).toEqual(entries.map((e) => [e.tenantId, e.name]));
          const expected = structuredClone(before);
          for (const { rule } of report.created) {
            expect(after.rules[rule!.id]).toMatchObject({ version: 1 });
            expected.rules[rule!.id] = after.rules[rule!.id]!;
          }
          return expected;
        },
      });
    },

    rollbackRule: (cell) =>
      runHttpCell(cell, {
        // A victim at version 2 (limit 10, then 20): rolling back to version 1 makes version 3 with limit 10.
        prepare: async () => {
          const id = await ruleIdFor(cell, true);
          if (cell.target !== "unknown") await admin.data(UpdateRuleDocument, { id, input: { limit: 20 } });
          return id;
        },
        send: (client, id) => client.request(RollbackRuleDocument, { id, version: 1 }),
        pick: (data) => data.rollbackRule,
        allowed: (rule, id, before) => {
          expect(rule).toMatchObject({ id, tenantId: tenantOf(cell), limit: 10, version: 3 });
          const expected = structuredClone(before);
          expected.rules[id] = rule;
          return expected;
        },
      }),

    promoteRule: (cell) =>
      runHttpCell(cell, {
        prepare: async () => (cell.target === "unknown" ? randomUUID() : (await victimRule(tenantOf(cell), { action: "LOG_ONLY" })).id),
        send: (client, id) => client.request(PromoteRuleDocument, { id, action: "REJECT" }),
        pick: (data) => data.promoteRule,
        allowed: (rule, id, before) => {
          expect(rule).toMatchObject({ id, tenantId: tenantOf(cell), action: "REJECT", version: 2 });
          const expected = structuredClone(before);
          expected.rules[id] = rule;
          return expected;
        },
      }),

    overrides: (cell) =>
      runHttpCell(cell, {
        prepare: () => overrideVictim(cell, true),
        watch: (p) => p.watch,
        overridesOf: (p) => p.rules,
        send: (client, p) => client.request(OverridesDocument, { ruleId: p.ruleId }),
        pick: (data) => data.overrides,
        allowed: (page, p, before) => {
          expect(page).toEqual({ items: [before.overrides[p.overrideId]], endCursor: null, hasNextPage: false });
          expect(page.items[0]).toMatchObject({ ruleId: p.ruleId, tenantId: tenantOf(cell), ...VICTIM_OVERRIDE });
          return before;
        },
      }),

    setOverride: (cell) =>
      runHttpCell(cell, {
        prepare: () => overrideVictim(cell, false),
        watch: (p) => p.watch,
        overridesOf: (p) => p.rules,
        send: (client, p) => client.request(SetOverrideDocument, { input: { ruleId: p.ruleId, ...VICTIM_OVERRIDE } }),
        pick: (data) => data.setOverride,
        allowed: (override, p, before, after) => {
          expect(before.overrides).toEqual({});
          expect(before.buckets[bucket(p.ruleId, p.key)]).toBe(unusedUnder(10));
          expect(override).toMatchObject({ ruleId: p.ruleId, tenantId: tenantOf(cell), ...VICTIM_OVERRIDE, version: before.rules[p.ruleId]!.version + 1 });
          const expected = nextVersion(before, after, p.ruleId);
          expected.overrides[override.id] = override;
          expected.buckets[bucket(p.ruleId, p.key)] = unusedUnder(VICTIM_OVERRIDE.limit);
          return expected;
        },
      }),

    releaseLease: (cell) =>
      runHttpCell(cell, {
        // A CONCURRENCY victim rule of the target's tenant with one lease taken, as ADMIN, by the check of user "v" ("*": of the home tenant).
        prepare: async () => {
          if (cell.target === "unknown") {
            const id = Buffer.from(JSON.stringify([T[cell.home], randomUUID(), [[randomUUID(), "user:v"]]])).toString("base64url");
            return { id, watch: [] as CheckLimitsInput[], ruleId: "", key: "", held: false };
          }
          const victim = await victimRule(tenantOf(cell), { algorithm: "CONCURRENCY" });
          const { use, key } = victimBucket(cell, tenantOf(cell), victim.resource);
          const { checkLimits } = await admin.data(CheckLeaseDocument, { request: use });
          // Only a key that may check in the lease's tenant releases it.
          const held = cell.who === "ADMIN" || use.tenantId === T[cell.home];
          return { id: checkLimits.lease!.id, watch: [use], ruleId: victim.id, key, held };
        },
        watch: (p) => p.watch,
        send: (client, p) => client.request(ReleaseLeaseDocument, { id: p.id }),
        pick: (data) => data.releaseLease,
        allowed: (released, p, before) => {
          expect(released).toBe(p.held);
          const expected = structuredClone(before);
          if (p.held) expected.buckets[bucket(p.ruleId, p.key)]! += 1;
          return expected;
        },
      }),

    ban: (cell) =>
      runHttpCell(cell, {
        prepare: async () => `banned-${randomUUID()}`,
        send: (client, value) => client.request(BanDocument, { input: { tenantId: tenantOf(cell), dimension: "USER", value, durationSeconds: 3600 } }),
        pick: (data) => data.ban,
        allowed: (ban, value, before) => {
          expect(ban).toMatchObject({ tenantId: tenantOf(cell), dimension: "USER", value });
          const expected = structuredClone(before);
          expected.bans[ban.id] = ban;
          return expected;
        },
      }),

    unban: (cell) =>
      runHttpCell(cell, {
        prepare: () => victimBan(cell),
        send: (client, id) => client.request(UnbanDocument, { id }),
        pick: (data) => data.unban,
        allowed: (lifted, id, before) => {
          const mayLift = cell.target === "own" || (cell.target === "other" && cell.who === "ADMIN");
          expect(lifted).toBe(mayLift);
          const expected = structuredClone(before);
          if (mayLift) delete expected.bans[id];
          return expected;
        },
      }),

    bans: (cell) =>
      runHttpCell(cell, {
        prepare: () => victimBan(cell),
        send: (client) => client.request(BansDocument, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) }),
        pick: (data) => data.bans,
        allowed: (bans, id, before) => {
          if (cell.target === "omitted" && cell.who === "ADMIN") {
            expect(bans.map((b) => b.id)).toContain(id);
            return before;
          }
          const tenantId = cell.target === "omitted" ? T[cell.home] : tenantOf(cell);
          for (const ban of bans) expect(ban.tenantId).toBe(tenantId);
          if (tenantId !== "*") expect(bans.map((b) => b.id)).toContain(id);
          return before;
        },
      }),

    deleteOverride: (cell) =>
      runHttpCell(cell, {
        prepare: () => overrideVictim(cell, true),
        watch: (p) => p.watch,
        overridesOf: (p) => p.rules,
        send: (client, p) => client.request(DeleteOverrideDocument, { id: p.overrideId }),
        pick: (data) => data.deleteOverride,
        allowed: (deleted, p, before, after) => {
          expect(deleted).toBe(true);
          expect(Object.keys(before.overrides)).toEqual([p.overrideId]);
          expect(before.buckets[bucket(p.ruleId, p.key)]).toBe(unusedUnder(VICTIM_OVERRIDE.limit));
          const expected = nextVersion(before, after, p.ruleId);
          delete expected.overrides[p.overrideId];
          expected.buckets[bucket(p.ruleId, p.key)] = unusedUnder(10);
          return expected;
        },
      }),
  };

  /** A ban of a user nobody checks as, in the tenant a cell's target names (none for "unknown", nor in "*", which holds no bans). */
  async function victimBan(cell: Cell): Promise<string> {
    if (cell.target === "unknown" || tenantOf(cell) === "*") return randomUUID();
    return (await admin.data(BanDocument, { input: { tenantId: tenantOf(cell), dimension: "USER", value: `banned-${randomUUID()}`, durationSeconds: 3600 } })).ban.id;
  }

  /** A rules file creating one victim-like rule per entry. */
  function rulesFile(entries: { tenantId: string; name: string }[]): string {
    if (entries.length === 0) return "rules: []\n";
    return ["rules:", ...entries.flatMap(({ tenantId, name }) => [
      `  - tenantId: ${JSON.stringify(tenantId)}`,
      `    name: ${JSON.stringify(name)}`,
      "    scope: [USER]",
      `    resource: ${JSON.stringify(`/victim/${randomUUID()}/**`)}`,
      "    limit: 10",
      "    window: 1",
      "    windowUnit: DAYS",
    ])].join("\n");
  }

  // -- WebSocket cells ----------------------------------------------------------

  type EventOperation = "throttleEvents" | "ruleChanges" | "nearLimitEvents" | "invalidations" | "banEvents";
  const EVENT_DOCUMENTS = {
    throttleEvents: ThrottleEventsDocument,
    ruleChanges: RuleChangesDocument,
    nearLimitEvents: NearLimitEventsDocument,
    invalidations: InvalidationsDocument,
    banEvents: BanEventsDocument,
  };
  /** Operations made to happen by rule changes, which "*" rules make too. */
  const followsRuleChanges = (op: EventOperation) => op === "ruleChanges" || op === "invalidations";
  const isEventOperation = (op: Operation): op is EventOperation => op in EVENT_DOCUMENTS;

  function openSocket(token: string | undefined): Socket {
    const socket: Socket = { closeCode: null, client: undefined as unknown as Client };
    socket.client = createClient({
      url: t.app.url.replace(/^http/, "ws"),
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: token === undefined ? {} : { authorization: `Bearer ${token}` },
      on: { closed: (event) => (socket.closeCode = (event as { code: number }).code) },
    });
    sockets.push(socket.client);
    return socket;
  }

  function subscribe(socket: Socket, op: EventOperation, variables: { tenantId?: string; ruleId?: string }): Subscription<TenantEvent> {
    const sub: Subscription<TenantEvent> = { events: [], errors: [], done: false };
    const query = print(EVENT_DOCUMENTS[op]);
    socket.client.subscribe<Record<EventOperation, TenantEvent>>(
      { query, variables },
      {
        next: (result) => {
          if (result.errors) sub.errors.push(...result.errors);
          const event = result.data?.[op];
          // Every invalidations subscription starts with LISTENING, which names no tenant.
          if (event && event.tenantId !== null) sub.events.push(event);
        },
        error: (error) => {
          sub.done = true;
          if (Array.isArray(error)) sub.errors.push(...(error as GraphQLFormattedError[]));
        },
        complete: () => {
          sub.done = true;
        },
      },
    );
    return sub;
  }

  /**
   * Makes one event of `op` happen in a tenant, at once: a denial or a nearly
   * spent bucket of a user never seen before (throttle and near-limit events
   * of a bucket after its first are held back and coalesced), a ban of a user
   * nobody checks as, or a change of its churn rule (`concurrent`: a new rule instead, since concurrent updates
   * of one rule may conflict).
   */
  async function trigger(op: EventOperation, tenantId: string, concurrent = false): Promise<void> {
    if (op === "throttleEvents" || op === "nearLimitEvents") {
      const deny = op === "throttleEvents";
      const request = { tenantId, userId: randomUUID(), resource: deny ? "/deny/x" : "/near/x", cost: deny ? 2 : 10 };
      const { checkLimits } = await admin.data(CheckLimitsDocument, { request });
      expect(checkLimits.allowed).toBe(!deny);
    } else if (op === "banEvents") {
      await admin.data(BanDocument, { input: { tenantId, dimension: "USER", value: `banned-${randomUUID()}`, durationSeconds: 3600 } });
    } else if (concurrent) {
      await createRule({ tenantId, name: "churn", resource: `/churn/${randomUUID()}/**` });
    } else {
      await admin.data(UpdateRuleDocument, { id: churnRule[tenantId]!, input: { priority: ++churned } });
    }
  }

  /** Tenants whose events can be made to happen: a throttle event always names a real tenant, a rule change may name "*". */
  const eventTenants = (op: EventOperation) => (followsRuleChanges(op) ? [T.A, T.B, "*"] : [T.A, T.B]);

  const countOf = (sub: Subscription<TenantEvent>, tenantId: string) => sub.events.filter((e) => e.tenantId === tenantId).length;

  /**
   * An accepted subscription receives the events of exactly `expected` tenants.
   * Once it is live (it, or a marker subscription of the caller's own on the same
   * socket, has received an event), one more round makes an event in every
   * other tenant first and in every expected tenant last: the stream is in
   * order, so when the last ones have arrived, anything else would have too.
   */
  async function expectOnlyEventsOf(cell: Cell, op: EventOperation, socket: Socket, sub: Subscription<TenantEvent>, expected: string[]): Promise<void> {
    const home = T[cell.home];
    const marker = subscribe(socket, op, {});
    const liveness = expected.length > 0 ? sub : marker;
    const liveTenants = expected.length > 0 ? expected : [home];
    for (let attempt = 0; liveness.events.length === 0; attempt++) {
      if (attempt === 50) throw new Error("the subscription never received an event");
      for (const tenantId of liveTenants) await trigger(op, tenantId);
      for (let i = 0; i < 5 && liveness.events.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const unexpected = eventTenants(op).filter((tenantId) => !expected.includes(tenantId));
    const seen = Object.fromEntries(expected.map((tenantId) => [tenantId, countOf(sub, tenantId)]));
    const markerSeen = marker.events.length;
    for (const tenantId of unexpected) await trigger(op, tenantId);
    for (const tenantId of expected) await trigger(op, tenantId);
    if (expected.length > 0) {
      await waitUntil(() => expected.every((tenantId) => countOf(sub, tenantId) > seen[tenantId]!), `events of ${expected.join(", ")}`);
    } else {
      await trigger(op, home);
      await waitUntil(() => marker.events.length >= markerSeen + unexpected.length + 1, "the marker subscription's events");
    }
    expect(sub.errors).toEqual([]);
    expect(sub.done).toBe(false);
    expect([...new Set(sub.events.map((e) => e.tenantId))].sort()).toEqual([...expected].sort());
  }

  async function runSubscriptionCell(cell: Cell, op: EventOperation): Promise<void> {
    const socket = openSocket(tokenFor(cell.who, cell.home));
    try {
      const sub = subscribe(socket, op, cell.target === "omitted" ? {} : { tenantId: tenantOf(cell) });
      if (cell.expected === "UNAUTHENTICATED") {
        await waitUntil(() => socket.closeCode !== null, "the socket to close");
        expect(socket.closeCode).toBe(4403);
        expect(sub.events).toEqual([]);
        return;
      }
      if (cell.expected !== "ok") {
        await waitUntil(() => sub.done, "the subscription to be refused");
        expectNoStackTrace(sub.errors);
        expect(sub.events).toEqual([]);
        expect(outcomeOf(sub.errors, null)).toBe(cell.expected);
        return;
      }
      // A tenant's invalidations include those of "*" rules: they apply to the tenant too.
      const withGlobal = (tenantId: string) => (op === "invalidations" ? [tenantId, "*"] : [tenantId]);
      let expected: string[];
      if (cell.target === "omitted") expected = cell.who === "ADMIN" ? eventTenants(op) : withGlobal(T[cell.home]);
      else if (cell.target === "global") expected = followsRuleChanges(op) ? ["*"] : [];
      else expected = withGlobal(tenantOf(cell));
      await expectOnlyEventsOf(cell, op, socket, sub, expected);
    } finally {
      await socket.client.dispose();
    }
  }

  // -- the matrix ------------------------------------------------------------

  describe("the isolation matrix", () => {
    afterEach(async () => {
      const { rules } = await admin.data(ListRulesDocument, {});
      for (const rule of rules) {
        if (scratch.has(rule.id) || rule.resource?.startsWith("/victim/")) await admin.data(DeleteRuleDocument, { id: rule.id });
      }
      scratch.clear();
      const { listEntries } = await admin.data(ListEntriesDocument, {});
      for (const entry of listEntries) if (scratchEntries.has(entry.id)) await admin.data(RemoveListEntryDocument, { id: entry.id });
      scratchEntries.clear();
    });

    it("has a row for every root field of schema.graphql, and none for a field it lacks", () => {
      expect(Object.keys(MATRIX).sort()).toEqual(rootFieldsOfSchema().sort());
    });

    for (const cell of CELLS) {
      it(cell.name, async () => {
        if (isEventOperation(cell.op)) await runSubscriptionCell(cell, cell.op);
        else await HTTP_DRIVERS[cell.op](cell);
      });
    }
  });

  // -- the promises of README "Access", one by one -----------------------------

  describe("another tenant's ids", () => {
    /** Each call, made with some id: the answer for B's id must equal the answer for an id nobody has. */
    const CALLS = {
      "rule(id)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(GetRuleDocument, { id }) },
      "updateRule(id)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(UpdateRuleDocument, { id, input: { limit: 5 } }) },
      "updateRule(id, expectedVersion)": {
        kind: "rule",
        call: (c: GraphQLClient, id: string) => c.request(UpdateRuleDocument, { id, input: { limit: 5 }, expectedVersion: 7 }),
      },
      "updateRule(id) with an invalid input": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(UpdateRuleDocument, { id, input: { limit: 0 } }) },
      "deleteRule(id)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(DeleteRuleDocument, { id }) },
      "resetLimit(ruleId, key)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(ResetLimitDocument, { ruleId: id, key: "user:v" }) },
      "resetLimit(ruleId) with an empty key": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(ResetLimitDocument, { ruleId: id, key: "" }) },
      "revokeApiKey(id)": { kind: "key", call: (c: GraphQLClient, id: string) => c.request(RevokeApiKeyDocument, { id }) },
      "ruleHistory(id)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(RuleHistoryDocument, { id }) },
      "ruleHistory(id) of a deleted rule": { kind: "deleted rule", call: (c: GraphQLClient, id: string) => c.request(RuleHistoryDocument, { id }) },
      "rollbackRule(id, version)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(RollbackRuleDocument, { id, version: 1 }) },
      "promoteRule(id)": { kind: "rule", call: (c: GraphQLClient, id: string) => c.request(PromoteRuleDocument, { id, action: "REJECT" }) },
      "overrides(ruleId)": { kind: "rule", call: (c: GraphQLClient, ruleId: string) => c.request(OverridesDocument, { ruleId }) },
      "overrides(ruleId) with an invalid first": { kind: "rule", call: (c: GraphQLClient, ruleId: string) => c.request(OverridesDocument, { ruleId, first: 0 }) },
      "setOverride(input.ruleId)": { kind: "rule", call: (c: GraphQLClient, ruleId: string) => c.request(SetOverrideDocument, { input: { ruleId, ...VICTIM_OVERRIDE } }) },
      "setOverride(input.ruleId) with an invalid input": {
        kind: "rule",
        call: (c: GraphQLClient, ruleId: string) => c.request(SetOverrideDocument, { input: { ruleId, ...VICTIM_OVERRIDE, limit: 0 } }),
      },
      "deleteOverride(id)": { kind: "override", call: (c: GraphQLClient, id: string) => c.request(DeleteOverrideDocument, { id }) },
    } as const;
    const rows = (["TENANT_ADMIN", "CHECKER", "VIEWER"] as const).flatMap((role) => Object.keys(CALLS).map((call) => ({ role, call: call as keyof typeof CALLS })));

    it.each(rows)("$call with an id of tenant B answers $role of tenant A exactly like an id that does not exist", async ({ role, call }) => {
      const { kind, call: send } = CALLS[call];
      const theirRule = kind === "key" ? null : (await victimRule(T.B)).id;
      if (kind === "deleted rule") await admin.data(DeleteRuleDocument, { id: theirRule! });
      const theirs =
        kind === "key"
          ? await victimKey(T.B)
          : kind === "override"
            ? (await admin.data(SetOverrideDocument, { input: { ruleId: theirRule!, ...VICTIM_OVERRIDE } })).setOverride.id
            : theirRule!;
      const overridesOf = kind === "rule" || kind === "override" ? [theirRule!] : [];
      const unknown = randomUUID();
      const client = clientFor(role, "A");
      const before = await snapshot(fixtureWatch(), overridesOf);
      const answers = [await send(client, theirs), await send(client, unknown)];
      const [forTheirs, forUnknown] = answers.map((response, i) =>
        JSON.stringify({ status: response.status, data: response.data, errors: response.errors }).replaceAll(i === 0 ? theirs : unknown, "<id>"),
      );
      expect(forTheirs).toBe(forUnknown);
      expect(answers[0]!.errors?.[0]?.extensions?.code ?? "null").toMatch(/^(NOT_FOUND|null)$/);
      expect(await snapshot(fixtureWatch(), overridesOf)).toEqual(before);
    });
  });

  describe("listing rules", () => {
    it("rules(tenantId: B) from each of A's keys is FORBIDDEN", async () => {
      for (const role of ["TENANT_ADMIN", "CHECKER", "VIEWER"] as const) {
        const response = await clientFor(role, "A").request(ListRulesDocument, { tenantId: T.B });
        expect(response.errors?.[0]?.extensions?.code).toBe("FORBIDDEN");
        expect(response.data).toBeNull();
      }
    });

    it("rules() for A's keys lists A's rules and never one of B's", async () => {
      const added = await createRule({ tenantId: T.B, name: "late-b", resource: "/late/**" });
      for (const role of ["TENANT_ADMIN", "VIEWER"] as const) {
        const { rules } = await clientFor(role, "A").data(ListRulesDocument, {});
        expect(rules.map((r) => r.id)).toContain(fixtureRule[T.A]);
        expect(rules.every((r) => r.tenantId === T.A)).toBe(true);
        expect(JSON.stringify(rules)).not.toContain(T.B);
        expect(rules.map((r) => r.id)).not.toContain(added.id);
      }
    });
  });

  describe("rules files", () => {
    it("importRules naming B's rule answers A's TENANT_ADMIN FORBIDDEN, also as a dry run, whether or not B has a rule of that name", async () => {
      const { rule } = await admin.data(GetRuleDocument, { id: fixtureRule[T.B]! });
      const answers = [];
      for (const dryRun of [true, false]) {
        for (const name of [rule!.name, `no-such-rule-${randomUUID().slice(0, 8)}`]) {
          const before = await snapshot();
          const yaml = `rules:\n  - tenantId: ${JSON.stringify(T.B)}\n    name: ${JSON.stringify(name)}\n    limit: 1\n    window: 1\n`;
          const response = await clientFor("TENANT_ADMIN", "A").request(ImportRulesDocument, { yaml, dryRun });
          expect(response.data).toBeNull();
          answers.push(JSON.stringify(response.errors).replaceAll(name, "<name>"));
          expect(await snapshot()).toEqual(before);
        }
      }
      expect(answers.map((a) => JSON.parse(a)[0].extensions.code)).toEqual(["FORBIDDEN", "FORBIDDEN", "FORBIDDEN", "FORBIDDEN"]);
      expect(answers[0]).toBe(answers[1]);
      expect(answers[2]).toBe(answers[3]);
    });
  });

  describe("batches that mix tenants", () => {
    it.each(["TENANT_ADMIN", "CHECKER"] as const)("are refused whole for %s of A, in either order, and count nothing in A or B", async (role) => {
      const client = clientFor(role, "A");
      for (const order of [
        [T.A, T.B],
        [T.B, T.A],
      ]) {
        const before = await snapshot();
        const response = await client.request(CheckLimitsBatchDocument, { requests: order.map((tenantId) => fixtureCheck(tenantId)) });
        expect(response.errors?.map((e) => e.extensions?.code)).toEqual(["FORBIDDEN"]);
        expect(response.data).toBeNull();
        expect(await snapshot()).toEqual(before);
      }
    });

    it("refuses two aliased checks of A and B in one operation, counting neither", async () => {
      const before = await snapshot();
      const response = await clientFor("CHECKER", "A").request(CheckTwoAliasedDocument, { first: fixtureCheck(T.A), second: fixtureCheck(T.B) });
      expect(response.errors?.length).toBeGreaterThan(0);
      expect(new Set(response.errors?.map((e) => e.extensions?.code))).toEqual(new Set(["FORBIDDEN"]));
      expect(response.data).toBeNull();
      expect(await snapshot()).toEqual(before);
    });

    // The per-request DataLoader splits at 1,000 (maxBatchSize); an operation never gets there, so its checks are
    // never authorized chunk by chunk: at most 1,000 are admitted, and one more refuses the operation whole.
    it.each([
      [999, "FORBIDDEN"],
      [1_000, "BAD_USER_INPUT"],
    ])("refuses a batch of %i whose last check is B's whole, beside a check of A, counting none of its checks (%s)", async (size, code) => {
      const user = `chunk-${randomUUID().slice(0, 8)}`;
      const requests = [...Array.from({ length: size - 1 }, () => fixtureCheck(T.A, { userId: user })), fixtureCheck(T.B, { userId: user })];
      const [beforeA, beforeB] = [await remainingOf(T.A, user), await remainingOf(T.B, user)];
      const response = await clientFor("CHECKER", "A").request(CheckSingleThenBatchDocument, { single: fixtureCheck(T.A, { userId: `${user}-single` }), requests });
      expect(response.errors?.map((e) => e.extensions?.code)).toEqual([code]);
      expect(response.data).toBeNull();
      expect(await remainingOf(T.B, user)).toEqual(beforeB);
      expect(await remainingOf(T.A, user), "checks of A in the refused batch were counted").toEqual(beforeA);
    });
  });

  describe('a "*" rule keyed by USER', () => {
    it("applies to A and B in buckets of their own: A's results show only A's count, under keys starting tenant:A|", async () => {
      const rule = await createRule({ tenantId: "*", name: "per-user-everywhere", resource: "/everywhere/**", limit: 10 });
      const request = (tenantId: string) => ({ tenantId, userId: "u1", resource: "/everywhere/x" });
      const checkerB = clientFor("CHECKER", "B");
      for (let i = 0; i < 4; i++) await checkerB.data(CheckLimitsDocument, { request: request(T.B) });

      const seenByA = await clientFor("CHECKER", "A").request(CheckLimitsDocument, { request: request(T.A) });
      const results = seenByA.data!.checkLimits.results;
      expect(results.map((r) => ({ rule: r.rule.id, key: r.key, remaining: r.remaining }))).toEqual([{ rule: rule.id, key: `tenant:${T.A}|user:u1`, remaining: 9 }]);
      expect(results.every((r) => r.key.startsWith(`tenant:${T.A}|`))).toBe(true);
      expect(JSON.stringify(seenByA)).not.toContain(T.B);

      const seenByB = (await checkerB.data(CheckLimitsDocument, { request: request(T.B) })).checkLimits;
      expect(seenByB.results.filter((r) => r.rule.id === rule.id).map((r) => [r.key, r.remaining])).toEqual([[`tenant:${T.B}|user:u1`, 5]]);
    });

    it("cannot be reset in B's bucket by A's TENANT_ADMIN (FORBIDDEN: only an ADMIN changes \"*\" rules), and B's count stays", async () => {
      const before = await snapshot();
      const key = `tenant:${T.B}|user:${FIXTURE_USER}`;
      expect(before.buckets[bucket(globalRule, key)]).toBeDefined();
      const response = await clientFor("TENANT_ADMIN", "A").request(ResetLimitDocument, { ruleId: globalRule, key });
      expect(response.errors?.[0]?.extensions?.code).toBe("FORBIDDEN");
      expect(await snapshot()).toEqual(before);
    });
  });

  describe("resetLimit across tenants", () => {
    it("on B's rule from A's TENANT_ADMIN is NOT_FOUND and leaves B's bucket as it was", async () => {
      await clientFor("CHECKER", "B").data(CheckLimitsDocument, { request: fixtureCheck(T.B) });
      const before = await snapshot();
      const response = await clientFor("TENANT_ADMIN", "A").request(ResetLimitDocument, { ruleId: fixtureRule[T.B]!, key: FIXTURE_KEY });
      expect(response.errors?.[0]?.extensions?.code).toBe("NOT_FOUND");
      expect(await snapshot()).toEqual(before);
    });
  });

  describe("subscriptions", () => {
    it("A's VIEWER subscribing to tenant B's throttle events is refused with FORBIDDEN and receives nothing", async () => {
      const socket = openSocket(secrets.A.VIEWER);
      const sub = subscribe(socket, "throttleEvents", { tenantId: T.B });
      await waitUntil(() => sub.done, "the subscription to be refused");
      await trigger("throttleEvents", T.B);
      expect(sub.events).toEqual([]);
      expect(sub.errors.map((e) => e.extensions?.code)).toEqual(["FORBIDDEN"]);
      await socket.client.dispose();
    });

    it.each(["throttleEvents", "ruleChanges", "nearLimitEvents"] as const)(
      "%s without tenantId delivers A's VIEWER only A's events while B's happen at the same time",
      async (op) => {
        const socket = openSocket(secrets.A.VIEWER);
        const sub = subscribe(socket, op, {});
        while (sub.events.length === 0) {
          await trigger(op, T.A);
          for (let i = 0; i < 20 && sub.events.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        }
        const before = countOf(sub, T.A);
        const rounds = 20;
        await Promise.all(Array.from({ length: rounds }, () => (op === "ruleChanges" ? [T.B, T.A, "*"] : [T.B, T.A]).map((tenantId) => trigger(op, tenantId, true))).flat());
        await trigger(op, T.B);
        await trigger(op, T.A);
        await waitUntil(() => countOf(sub, T.A) >= before + rounds + 1, "A's events");
        expect(sub.events.filter((e) => e.tenantId !== T.A)).toEqual([]);
        expect(sub.events.map((e) => e.ruleId)).not.toContain({ throttleEvents: denyRule, ruleChanges: churnRule, nearLimitEvents: nearRule }[op][T.B]);
        await socket.client.dispose();
      },
    );

    it("throttleEvents(ruleId: B's rule) delivers A's VIEWER none of B's events", async () => {
      const socket = openSocket(secrets.A.VIEWER);
      const sub = subscribe(socket, "throttleEvents", { ruleId: denyRule[T.B]! });
      const marker = subscribe(socket, "throttleEvents", {});
      while (marker.events.length === 0) {
        await trigger("throttleEvents", T.A);
        for (let i = 0; i < 20 && marker.events.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10));
      }
      const seen = marker.events.length;
      for (let i = 0; i < 3; i++) await trigger("throttleEvents", T.B);
      await trigger("throttleEvents", T.A);
      await waitUntil(() => marker.events.length > seen, "the marker's event");
      expect(sub.events).toEqual([]);
      await socket.client.dispose();
    });
  });
});
