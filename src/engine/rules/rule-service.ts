/**
 * Rule management: authorize, validate, write through the repository (which
 * records each change in the rule's history in the same transaction, with the
 * API key that made it), and publish the change on the event bus. Every
 * instance's rule book, this one's included, applies it from there
 * (RuleSync); the bus delivers this instance's own changes before publishing
 * resolves, so its very next check uses them. A rule the caller may not read
 * does not exist for it (NOT_FOUND), so another tenant's ids reveal nothing.
 */

import { randomUUID } from "node:crypto";
import { authorize, may, scopeTenant, type Principal } from "../../domain/access.js";
import { ConflictError, NotFoundError, RuleQuotaError, ValidationError } from "../../domain/errors.js";
import type { RuleChange, RuleChangeKind } from "../../domain/events.js";
import { creationsByTenant, type Clock, type CounterStore, type EventBus, type RuleRepository } from "../../domain/ports.js";
import { hasControlCharacters } from "../../domain/request.js";
import type { ChangeOrigin, RuleRevision } from "../../domain/revision.js";
import { validateOverride, type Override, type OverrideInput } from "../../domain/override.js";
import type { Action, Rule, RuleSpec } from "../../domain/rule.js";
import { sameSpec, specOf, validateNewRule, validateRuleChange, type RuleInput } from "../../domain/rule-validation.js";
import { DEFAULT_RULE_LIMITS, LENGTHS, type RuleLimits } from "../../domain/service-limits.js";
import { reference } from "../../domain/validation.js";
import type { AccessListService } from "../access-lists/access-list-service.js";
import type { RuleBook } from "../decision/rule-book.js";
import { planImport, type ImportProblem, type PlannedRule } from "./rule-import.js";
import { writeRulesFile } from "./rules-file.js";

/** Concurrent writers without expectedVersion retry this many times before reporting a conflict. */
const UPDATE_ATTEMPTS = 5;
const IMPORT_NOTE = "imported from a rules file";
/** Overrides one page of `overrides` may hold: a page is read from the database in one query. */
const MAX_OVERRIDES_PAGE = 1000;

export interface ImportedRule {
  tenantId: string;
  name: string;
  /** Where the rule's entry starts in the file. */
  line: number;
  /** The rule as stored when the import returns: for a dry run or an invalid file that is before any change, so null for one still to be created. */
  rule: Rule | null;
}

export interface ImportReport {
  dryRun: boolean;
  /** Access list entries of the file's `lists` added (or, for a dry run or an invalid file, to be added), and those already listed. */
  listEntriesAdded: number;
  listEntriesUnchanged: number;
  /** The file was valid, not a dry run, and every change it asks for is written (in one transaction). */
  applied: boolean;
  created: ImportedRule[];
  updated: ImportedRule[];
  unchanged: ImportedRule[];
  /** Every problem found; when there is any, nothing is written. */
  invalid: ImportProblem[];
}

export class RuleService {
  constructor(
    private readonly repository: RuleRepository,
    private readonly book: RuleBook,
    private readonly store: CounterStore,
    private readonly events: EventBus,
    private readonly clock: Clock,
    private readonly limits: RuleLimits = DEFAULT_RULE_LIMITS,
    /** Where a rules file's `lists` go; null: a service without access lists (a file naming some is refused). */
    private readonly lists: AccessListService | null = null,
  ) {}

  get(principal: Principal, id: string): Rule | null {
    const rule = this.book.get(id);
    return rule !== null && may(principal, "readRules", rule.tenantId) ? rule : null;
  }

  list(principal: Principal, tenantId?: string | null): Rule[] {
    return this.book.list(scopeTenant(principal, "readRules", tenantId));
  }

  async create(principal: Principal, input: RuleInput): Promise<Rule> {
    if (typeof input.tenantId === "string") authorize(principal, "writeRules", input.tenantId);
    const spec = validateNewRule(input);
    authorize(principal, "writeRules", spec.tenantId);
    const rule = await this.repository
      .create(randomUUID(), spec, { actor: principal.keyId, note: null }, this.limits.maxRulesPerTenant)
      .catch(quotaAsInput("input.tenantId"));
    await this.publish("CREATED", rule);
    return rule;
  }

  update(principal: Principal, id: string, input: RuleInput, expectedVersion?: number | null): Promise<Rule> {
    return this.change(principal, id, expectedVersion, null, (current) => validateRuleChange(current, input));
  }

  /** Shadow to enforcement in one step: a LOG_ONLY rule takes `action`, and its history says so. */
  promote(principal: Principal, id: string, action: Action, expectedVersion?: number | null): Promise<Rule> {
    if (action === "LOG_ONLY") throw new ValidationError("action", "must be REJECT or THROTTLE: a rule is promoted out of LOG_ONLY");
    return this.change(principal, id, expectedVersion, `promoted from LOG_ONLY to ${action}`, (current) => {
      if (current.action !== "LOG_ONLY") {
        throw new ConflictError(`rule ${id} is not in shadow mode (its action is ${current.action}): only a LOG_ONLY rule can be promoted`);
      }
      return { ...specOf(current), action };
    });
  }

  /** A new version equal to `version` (nothing changes when the rule already equals it). */
  async rollback(principal: Principal, id: string, version: number): Promise<Rule> {
    const target = (await this.history(principal, id)).find((revision) => revision.version === version);
    if (target === undefined) throw new NotFoundError(`version ${version} of rule`, id);
    if (target.after === null) throw new ValidationError("version", `${version} is the deletion of rule ${id}: roll back to a version before it`);
    const old = specOf(target.after);
    return this.change(principal, id, null, `rolled back to version ${version}`, (current) => validateRuleChange(current, old));
  }

  async delete(principal: Principal, id: string): Promise<boolean> {
    this.writable(principal, id, await this.repository.get(id));
    const deleted = await this.repository.delete(id, { actor: principal.keyId, note: null });
    if (deleted === null) throw new NotFoundError("rule", id);
    await this.publish("DELETED", deleted);
    return true;
  }

  /** Every revision of the rule, oldest first, also once it is deleted. */
  async history(principal: Principal, id: string): Promise<RuleRevision[]> {
    const revisions = await this.repository.history(id);
    if (revisions.length === 0 || !may(principal, "readRules", revisions[0]!.tenantId)) throw new NotFoundError("rule", id);
    return revisions;
  }

  /**
   * Validates a whole rules file, then writes all of its changes in one
   * transaction, or none when anything is wrong. The caller must be allowed
   * to change every tenant the file names, or nothing is written. A file
   * larger than an import may be, or one that would take a tenant past its
   * rule quota, is refused whole (BAD_USER_INPUT on `yaml`), in a dry run too.
   */
  async importRules(principal: Principal, text: string, options: { dryRun: boolean }): Promise<ImportReport> {
    authorize(principal, "writeRules", principal.tenantId);
    const { maxImportBytes, maxImportRules, maxRulesPerTenant } = this.limits;
    const bytes = Buffer.byteLength(text, "utf8");
    if (bytes > maxImportBytes) {
      throw new ValidationError("yaml", `is ${bytes} bytes, more than the ${maxImportBytes} an import may have (MAX_IMPORT_BYTES); split the file`);
    }
    const [before, overrides, entries] = await Promise.all([this.repository.list(), this.repository.listOverrides(), this.lists?.all() ?? []]);
    const plan = planImport(text, before, randomUUID, byRule(overrides), new Date(this.clock.now()), entries);
    if (plan.entries > maxImportRules) {
      throw new ValidationError("yaml", `holds ${plan.entries} rules, more than the ${maxImportRules} an import may have (MAX_IMPORT_RULES); split the file`);
    }
    for (const { tenantId } of [...plan.rules, ...plan.lists.add, ...plan.lists.unchanged]) authorize(principal, "writeRules", tenantId);
    if (this.lists === null && plan.lists.add.length + plan.lists.unchanged.length > 0) throw new ValidationError("yaml", "holds lists, which this service does not keep");
    if (this.lists !== null && plan.problems.length === 0) {
      // As for rules: what the tenants would hold, as last read; the repository counts again, exactly, as it writes.
      for (const [tenantId, added] of countByTenant(plan.lists.add)) {
        const wouldHave = entries.filter((entry) => entry.tenantId === tenantId).length + added;
        if (wouldHave > this.lists.maxPerTenant) {
          throw new ValidationError("yaml", `would take tenant ${JSON.stringify(tenantId)} to ${wouldHave} access list entries, more than the ${this.lists.maxPerTenant} a tenant may have`);
        }
      }
    }
    const writes = plan.rules.flatMap((planned) => (planned.write === null ? [] : [planned.write]));
    if (plan.problems.length === 0) {
      // What the tenants would have, as last read: a dry run says so too. The repository counts again, exactly, as it writes.
      for (const [tenantId, created] of creationsByTenant(writes)) {
        const wouldHave = before.filter((rule) => rule.tenantId === tenantId).length + created;
        if (wouldHave > maxRulesPerTenant) throw tooManyRules("yaml", new RuleQuotaError(tenantId, wouldHave, maxRulesPerTenant));
      }
    }
    const applied = plan.problems.length === 0 && !options.dryRun;
    const written =
      applied && writes.length > 0
        ? await this.repository.writeAll(writes, { actor: principal.keyId, note: IMPORT_NOTE }, maxRulesPerTenant).catch(quotaAsInput("yaml"))
        : [];
    for (const [i, rule] of written.entries()) await this.publish(writes[i]!.kind === "create" ? "CREATED" : "UPDATED", rule);
    if (applied) await this.applyOverrides(plan.rules, { actor: principal.keyId, note: IMPORT_NOTE });
    if (applied) for (const spec of plan.lists.add) await this.lists!.add(principal, spec);
    const stored = new Map(written.map((rule) => [rule.id, rule]));
    const report: ImportReport = {
      dryRun: options.dryRun,
      applied,
      created: [],
      updated: [],
      unchanged: [],
      invalid: plan.problems,
      listEntriesAdded: plan.lists.add.length,
      listEntriesUnchanged: plan.lists.unchanged.length,
    };
    for (const { outcome, tenantId, name, line, current, write } of plan.rules) {
      report[outcome].push({ tenantId, name, line, rule: (write && stored.get(write.id)) ?? current });
    }
    return report;
  }

  /** The stored rules (of one tenant, or every tenant the caller may read), with their overrides not yet expired and the tenant's access list entries, as a rules file that imports back unchanged. */
  async exportRules(principal: Principal, tenantId?: string | null): Promise<string> {
    const tenant = scopeTenant(principal, "readRules", tenantId);
    const [rules, overrides, entries] = await Promise.all([this.repository.list(), this.repository.listOverrides(), this.lists?.all() ?? []]);
    const ofTenant = <T extends { tenantId: string }>(items: readonly T[]) => (tenant === null ? items : items.filter((item) => item.tenantId === tenant));
    return writeRulesFile(ofTenant(rules), byRule(overrides), ofTenant(entries));
  }

  /**
   * An import's override changes, once its rules are written: each is a
   * revision of its rule, published as setOverride's and deleteOverride's are.
   * They follow the rules' transaction rather than share it, so a database
   * lost between the two leaves the rules written and the overrides to a
   * second import of the same file.
   */
  private async applyOverrides(planned: readonly PlannedRule[], origin: ChangeOrigin): Promise<void> {
    for (const { overrides } of planned) {
      for (const spec of overrides?.set ?? []) {
        const written = await this.repository.setOverride(randomUUID(), spec, origin);
        if (written !== null) await this.publish("UPDATED", written.rule, { id: written.override.id, value: written.override });
      }
      for (const { id } of overrides?.deleted ?? []) {
        const deleted = await this.repository.deleteOverride(id, origin);
        if (deleted !== null) await this.publish("UPDATED", deleted.rule, { id, value: null });
      }
    }
  }

  /**
   * Sets an override of a rule (replacing the one of the same target, match
   * and identifier): a new version of the rule in its history, heard by
   * every instance as a rule change carrying the override.
   */
  async setOverride(principal: Principal, input: OverrideInput): Promise<Override> {
    reference(input.ruleId, "input.ruleId", LENGTHS.id);
    const rule = this.writable(principal, input.ruleId, this.book.get(input.ruleId));
    const spec = validateOverride(input, rule, new Date(this.clock.now()));
    const written = await this.repository.setOverride(randomUUID(), spec, { actor: principal.keyId, note: null });
    if (written === null) throw new NotFoundError("rule", input.ruleId);
    await this.publish("UPDATED", written.rule, { id: written.override.id, value: written.override });
    return written.override;
  }

  async deleteOverride(principal: Principal, id: string): Promise<boolean> {
    const existing = await this.repository.getOverride(id);
    if (existing === null || !may(principal, "readRules", existing.tenantId)) throw new NotFoundError("override", id);
    authorize(principal, "writeRules", existing.tenantId);
    const deleted = await this.repository.deleteOverride(id, { actor: principal.keyId, note: null });
    if (deleted === null) throw new NotFoundError("override", id);
    await this.publish("UPDATED", deleted.rule, { id, value: null });
    return true;
  }

  /** A page of a rule's overrides by id, expired ones included; `hasMore` when there are more after it. */
  async overrides(principal: Principal, ruleId: string, first: number, after: string | null): Promise<{ items: Override[]; hasMore: boolean }> {
    if (after !== null) reference(after, "after", LENGTHS.id);
    if (this.get(principal, ruleId) === null) throw new NotFoundError("rule", ruleId);
    if (!Number.isInteger(first) || first < 1 || first > MAX_OVERRIDES_PAGE) throw new ValidationError("first", `must be an integer from 1 to ${MAX_OVERRIDES_PAGE} (got ${first})`);
    const items = await this.repository.pageOverrides(ruleId, first + 1, after);
    return { items: items.slice(0, first), hasMore: items.length > first };
  }

  /** Forgets one bucket of one rule, in the store and in every instance's over-limit cache. */
  async resetLimit(principal: Principal, ruleId: string, key: string): Promise<boolean> {
    const rule = this.writable(principal, ruleId, this.book.get(ruleId));
    if (key.length === 0 || key.length > LENGTHS.bucketKey) throw new ValidationError("key", `must be 1 to ${LENGTHS.bucketKey} characters`);
    if (hasControlCharacters(key)) throw new ValidationError("key", "must not contain control characters");
    const forgotten = await this.store.reset(ruleId, key);
    await this.events.publish("bucketReset", { ruleId, tenantId: rule.tenantId, key });
    return forgotten;
  }

  /**
   * Writes the spec `respec` makes of the current rule, unless it changes
   * nothing. Without expectedVersion a concurrent writer makes it read again
   * and retry; with it, any other version is a conflict.
   */
  private async change(
    principal: Principal,
    id: string,
    expectedVersion: number | null | undefined,
    note: string | null,
    respec: (current: Rule) => RuleSpec,
  ): Promise<Rule> {
    const expected = expectedVersion ?? null;
    const origin: ChangeOrigin = { actor: principal.keyId, note };
    for (let attempt = 1; ; attempt++) {
      const current = this.writable(principal, id, await this.repository.get(id));
      if (expected !== null && current.version !== expected) throw staleVersion(id, expected, current.version);
      const spec = respec(current);
      if (sameSpec(spec, specOf(current))) return current;
      const updated = await this.repository.update(id, spec, current.version, origin);
      if (updated !== null) {
        await this.publish("UPDATED", updated);
        return updated;
      }
      if (expected !== null) {
        const now = await this.repository.get(id);
        if (now === null) throw new NotFoundError("rule", id);
        throw staleVersion(id, expected, now.version);
      }
      if (attempt >= UPDATE_ATTEMPTS) throw new ConflictError(`rule ${id} kept changing while it was being updated; try again`);
    }
  }

  /** The rule, if the caller may change it; NOT_FOUND if it may not even see it, FORBIDDEN if it only may see it. */
  private writable(principal: Principal, id: string, rule: Rule | null): Rule {
    if (rule === null || !may(principal, "readRules", rule.tenantId)) throw new NotFoundError("rule", id);
    authorize(principal, "writeRules", rule.tenantId);
    return rule;
  }

  private async publish(kind: RuleChangeKind, rule: Rule, override?: RuleChange["override"]): Promise<void> {
    const change: RuleChange = {
      kind,
      ruleId: rule.id,
      tenantId: rule.tenantId,
      version: kind === "DELETED" ? rule.version + 1 : rule.version,
      rule: kind === "DELETED" ? null : rule,
      at: new Date(this.clock.now()),
      ...(override === undefined ? {} : { override }),
    };
    await this.events.publish("ruleChange", change);
  }
}

function countByTenant(items: readonly { tenantId: string }[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const { tenantId } of items) counts.set(tenantId, (counts.get(tenantId) ?? 0) + 1);
  return counts;
}

function byRule(overrides: readonly Override[]): Map<string, Override[]> {
  const grouped = new Map<string, Override[]>();
  for (const override of overrides) {
    const own = grouped.get(override.ruleId);
    if (own === undefined) grouped.set(override.ruleId, [override]);
    else own.push(override);
  }
  return grouped;
}

/** Rethrows a RuleQuotaError as the caller's mistake in `field` (BAD_USER_INPUT), anything else as it is. */
function quotaAsInput(field: string): (error: unknown) => never {
  return (error) => {
    throw error instanceof RuleQuotaError ? tooManyRules(field, error) : error;
  };
}

function tooManyRules(field: string, { tenantId, wouldHave, max }: RuleQuotaError): ValidationError {
  return new ValidationError(field, `would take tenant ${JSON.stringify(tenantId)} to ${wouldHave} rules, more than the ${max} a tenant may have (MAX_RULES_PER_TENANT)`);
}

function staleVersion(id: string, expected: number, actual: number): ConflictError {
  return new ConflictError(`rule ${id} is at version ${actual}, not the expectedVersion ${expected}; read it again and retry`);
}
