/** The RuleRepository port in Maps, history included: for the tests that run the engine in-process. */

import { ConflictError, RuleQuotaError } from "../../src/domain/errors.js";
import type { RuleChangeKind } from "../../src/domain/events.js";
import { overrideIdentity, type Override, type OverrideSpec } from "../../src/domain/override.js";
import { creationsByTenant, type OverrideWrite, type RuleRepository, type RuleWrite } from "../../src/domain/ports.js";
import { UNKNOWN_ORIGIN, type ChangeOrigin, type RuleRevision } from "../../src/domain/revision.js";
import type { Rule, RuleSpec } from "../../src/domain/rule.js";

export class InMemoryRuleRepository implements RuleRepository {
  private readonly rules = new Map<string, Rule>();
  private readonly revisions = new Map<string, RuleRevision[]>();
  private readonly overrides = new Map<string, Override>();

  constructor(private readonly now: () => Date = () => new Date()) {}

  async list(): Promise<Rule[]> {
    return [...this.rules.values()];
  }

  /** Every write records a revision: their number is the mark. */
  async changeMark(): Promise<string> {
    let revisions = 0;
    for (const history of this.revisions.values()) revisions += history.length;
    return String(revisions);
  }

  async get(id: string): Promise<Rule | null> {
    return this.rules.get(id) ?? null;
  }

  async create(id: string, spec: RuleSpec, origin: ChangeOrigin = UNKNOWN_ORIGIN, maxRulesPerTenant = Number.POSITIVE_INFINITY): Promise<Rule> {
    this.withinQuota(new Map([[spec.tenantId, 1]]), maxRulesPerTenant);
    if ([...this.rules.values()].some((r) => r.tenantId === spec.tenantId && r.name === spec.name)) {
      throw new ConflictError(`input.name: tenant ${spec.tenantId} already has a rule named ${spec.name}`);
    }
    const now = this.now();
    const rule: Rule = { ...spec, id, version: 1, createdAt: now, updatedAt: now };
    this.rules.set(id, rule);
    this.record("CREATED", rule.version, null, rule, origin);
    return rule;
  }

  async update(id: string, spec: RuleSpec, version: number, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<Rule | null> {
    const current = this.rules.get(id);
    if (current === undefined || current.version !== version) return null;
    const rule: Rule = { ...current, ...spec, version: version + 1, updatedAt: this.now() };
    this.rules.set(id, rule);
    this.record("UPDATED", rule.version, current, rule, origin);
    return rule;
  }

  async delete(id: string, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<Rule | null> {
    const current = this.rules.get(id) ?? null;
    if (current === null) return null;
    this.rules.delete(id);
    this.record("DELETED", current.version + 1, current, null, origin);
    return current;
  }

  /** Checks every write before making any, which is all-or-nothing in a single thread. */
  async writeAll(writes: readonly RuleWrite[], origin: ChangeOrigin = UNKNOWN_ORIGIN, maxRulesPerTenant = Number.POSITIVE_INFINITY): Promise<Rule[]> {
    for (const write of writes) {
      const stale = write.kind === "update" ? this.rules.get(write.id)?.version !== write.version : this.rules.has(write.id);
      if (stale) throw new ConflictError("rules changed while these changes were being written, so none was written; read them again and retry");
    }
    this.withinQuota(creationsByTenant(writes), maxRulesPerTenant);
    const written: Rule[] = [];
    for (const write of writes) {
      written.push(write.kind === "create" ? await this.create(write.id, write.spec, origin) : (await this.update(write.id, write.spec, write.version, origin))!);
    }
    return written;
  }

  async history(id: string): Promise<RuleRevision[]> {
    return [...(this.revisions.get(id) ?? [])];
  }

  async setOverride(id: string, spec: OverrideSpec, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<OverrideWrite | null> {
    const rule = this.nextVersion(spec.ruleId);
    if (rule === null) return null;
    const existing = [...this.overrides.values()].find((o) => overrideIdentity(o) === overrideIdentity(spec));
    const now = this.now();
    const override: Override = { ...spec, id: existing?.id ?? id, tenantId: rule.tenantId, version: rule.version, actor: origin.actor, createdAt: existing?.createdAt ?? now, updatedAt: now };
    this.overrides.set(override.id, override);
    this.record("UPDATED", rule.version, rule, rule, origin, { before: existing ?? null, after: override });
    return { rule, override };
  }

  async deleteOverride(id: string, origin: ChangeOrigin = UNKNOWN_ORIGIN): Promise<OverrideWrite | null> {
    const existing = this.overrides.get(id);
    const rule = existing === undefined ? null : this.nextVersion(existing.ruleId);
    if (existing === undefined || rule === null) return null;
    this.overrides.delete(id);
    this.record("UPDATED", rule.version, rule, rule, origin, { before: existing, after: null });
    return { rule, override: { ...existing, version: rule.version } };
  }

  async getOverride(id: string): Promise<Override | null> {
    return this.overrides.get(id) ?? null;
  }

  async listOverrides(): Promise<Override[]> {
    const now = this.now().getTime();
    return [...this.overrides.values()].filter((o) => this.rules.has(o.ruleId) && (o.expiresAt === null || o.expiresAt.getTime() > now));
  }

  async pageOverrides(ruleId: string, first: number, after: string | null): Promise<Override[]> {
    return [...this.overrides.values()]
      .filter((o) => o.ruleId === ruleId && (after === null || o.id > after))
      .sort((a, b) => (a.id < b.id ? -1 : 1))
      .slice(0, first);
  }

  async close(): Promise<void> {}

  private nextVersion(ruleId: string): Rule | null {
    const current = this.rules.get(ruleId);
    if (current === undefined) return null;
    const rule = { ...current, version: current.version + 1, updatedAt: this.now() };
    this.rules.set(ruleId, rule);
    return rule;
  }

  private withinQuota(creations: ReadonlyMap<string, number>, max: number): void {
    for (const [tenantId, created] of creations) {
      const wouldHave = [...this.rules.values()].filter((rule) => rule.tenantId === tenantId).length + created;
      if (wouldHave > max) throw new RuleQuotaError(tenantId, wouldHave, max);
    }
  }

  private record(kind: RuleChangeKind, version: number, before: Rule | null, after: Rule | null, origin: ChangeOrigin, override: RuleRevision["override"] = null): void {
    const rule = (after ?? before)!;
    const revisions = this.revisions.get(rule.id) ?? [];
    revisions.push({ ruleId: rule.id, tenantId: rule.tenantId, version, kind, at: this.now(), ...origin, before, after, override });
    this.revisions.set(rule.id, revisions);
  }
}
