/**
 * The rules this instance enforces, compiled, in memory: a check never reads
 * the database. Changes arrive as RuleChanges (this instance's own and every
 * other instance's, through RuleSync) and full reloads; a rule never goes back
 * to an older version than one already seen. So with overrides: each is
 * applied by its own version (the rule's version it was written with), so
 * that an override change heard late never undoes a later one.
 */

import type { LimitParams } from "../../domain/algorithms/index.js";
import { targetValue } from "../../domain/bucket-key.js";
import type { RuleChange } from "../../domain/events.js";
import type { Override } from "../../domain/override.js";
import type { CheckRequest } from "../../domain/request.js";
import { withLaterFields, type Rule } from "../../domain/rule.js";
import { compileRule, type CompiledRule } from "./compiled-rule.js";
import { RuleOverrides } from "./override-index.js";
import { RuleIndex } from "./rule-index.js";

export class RuleBook {
  private readonly rules = new Map<string, CompiledRule>();
  /** Versions of deleted rules, so that a stale copy of one does not bring it back. */
  private readonly deleted = new Map<string, number>();
  /** When (in applied changes) each rule or deletion was last applied; see mark(). */
  private readonly appliedAt = new Map<string, number>();
  private changes = 0;
  private index = new RuleIndex([]);
  private loadedAt: Date | null = null;
  private readonly overrides = new Map<string, RuleOverrides>();
  /** Which rule each known override belongs to, and the versions of deleted ones (as `deleted` for rules). */
  private readonly overrideRules = new Map<string, string>();
  private readonly deletedOverrides = new Map<string, number>();
  private readonly overrideAppliedAt = new Map<string, number>();

  /** A point in the sequence of applied changes: take it before reading the repository, pass it to load(). */
  mark(): number {
    return this.changes;
  }

  /**
   * Replaces the set with a snapshot of the repository read after `since` was
   * marked. Changes applied after the mark are newer than the snapshot may
   * know: a rule created then is kept though the snapshot lacks it, one deleted
   * then stays deleted, and a newer version is never replaced by an older one.
   */
  load(rules: readonly Rule[], since: number = this.changes, overrides?: readonly Override[]): void {
    const fresh = new Map<string, CompiledRule>();
    for (const rule of rules) {
      if ((this.deleted.get(rule.id) ?? 0) >= rule.version) continue;
      const known = this.rules.get(rule.id);
      fresh.set(rule.id, known && known.rule.version >= rule.version ? known : compileRule(withLaterFields(rule)));
    }
    for (const [id, compiled] of this.rules) {
      if (!fresh.has(id) && (this.appliedAt.get(id) ?? 0) > since) fresh.set(id, compiled);
    }
    this.rules.clear();
    for (const [id, compiled] of fresh) this.rules.set(id, compiled);
    for (const [id, at] of this.appliedAt) {
      if (at <= since) {
        this.appliedAt.delete(id);
        this.deleted.delete(id);
      }
    }
    if (overrides !== undefined) this.loadOverrides(overrides, since);
    this.loadedAt = new Date();
    this.reindex();
  }

  /** As load() for rules: what changed after `since` is kept, and a newer version is never replaced by an older one. */
  private loadOverrides(overrides: readonly Override[], since: number): void {
    const fresh = new Map<string, Override>();
    for (const override of overrides) {
      if ((this.deletedOverrides.get(override.id) ?? 0) >= override.version || !this.rules.has(override.ruleId)) continue;
      const known = this.knownOverride(override.id);
      fresh.set(override.id, known !== undefined && known.version >= override.version ? known : override);
    }
    for (const [id, ruleId] of this.overrideRules) {
      const known = this.overrides.get(ruleId)?.get(id);
      if (known !== undefined && !fresh.has(id) && (this.overrideAppliedAt.get(id) ?? 0) > since) fresh.set(id, known);
    }
    this.overrides.clear();
    this.overrideRules.clear();
    for (const override of fresh.values()) this.setOverride(override);
    for (const [id, at] of this.overrideAppliedAt) {
      if (at <= since) {
        this.overrideAppliedAt.delete(id);
        this.deletedOverrides.delete(id);
      }
    }
  }

  /**
   * Applies one change; false when it is not newer than what the book holds.
   * A deletion is final (ids are never reused), whatever its version.
   */
  apply(change: RuleChange): boolean {
    const overrideApplied = change.override !== undefined && this.applyOverride(change.ruleId, change.override.id, change.version, change.override.value);
    return this.applyRule(change) || overrideApplied;
  }

  private applyRule(change: RuleChange): boolean {
    const known = this.rules.get(change.ruleId)?.rule.version ?? this.deleted.get(change.ruleId) ?? 0;
    const deletion = change.kind === "DELETED" || change.rule === null;
    if (deletion ? this.deleted.has(change.ruleId) : change.version <= known) return false;
    if (deletion) {
      this.rules.delete(change.ruleId);
      this.deleted.set(change.ruleId, Math.max(known, change.version));
      for (const override of this.overrides.get(change.ruleId)?.values() ?? []) this.overrideRules.delete(override.id);
      this.overrides.delete(change.ruleId);
    } else {
      this.rules.set(change.ruleId, compileRule(withLaterFields(change.rule!)));
    }
    this.appliedAt.set(change.ruleId, ++this.changes);
    this.reindex();
    return true;
  }

  /** Applies one override change at `version`; false when it is not newer than what the book holds. */
  private applyOverride(ruleId: string, id: string, version: number, value: Override | null): boolean {
    const known = this.knownOverride(id)?.version ?? this.deletedOverrides.get(id) ?? 0;
    if (version <= known) return false;
    if (value === null) {
      this.overrides.get(this.overrideRules.get(id) ?? ruleId)?.delete(id);
      this.overrideRules.delete(id);
      this.deletedOverrides.set(id, version);
    } else {
      this.setOverride({ ...value, version });
    }
    this.overrideAppliedAt.set(id, ++this.changes);
    return true;
  }

  private setOverride(override: Override): void {
    let byRule = this.overrides.get(override.ruleId);
    if (byRule === undefined) this.overrides.set(override.ruleId, (byRule = new RuleOverrides()));
    const replaced = byRule.replacing(override);
    if (replaced !== null) this.overrideRules.delete(replaced);
    byRule.set(override);
    this.overrideRules.set(override.id, override.ruleId);
  }

  private knownOverride(id: string): Override | undefined {
    const ruleId = this.overrideRules.get(id);
    return ruleId === undefined ? undefined : this.overrides.get(ruleId)?.get(id);
  }

  /** The override that applies to the request's bucket of this rule at nowMs, with the params it gives; null: the rule's own. */
  overrideFor(compiled: CompiledRule, request: CheckRequest, nowMs: number): { override: Override; params: LimitParams } | null {
    const byRule = this.overrides.get(compiled.rule.id);
    if (byRule === undefined) return null;
    return byRule.find(compiled.rule, compiled.targets, (target) => targetValue(target, request, compiled.rule.method), nowMs, request.ignorePathCase);
  }

  match(...args: Parameters<RuleIndex["match"]>): CompiledRule[] {
    return this.index.match(...args);
  }

  get(id: string): Rule | null {
    return this.rules.get(id)?.rule ?? null;
  }

  list(tenantId?: string | null): Rule[] {
    const all = [...this.rules.values()].map((c) => c.rule);
    const chosen = tenantId === undefined || tenantId === null ? all : all.filter((r) => r.tenantId === tenantId);
    return chosen.sort((a, b) => a.tenantId.localeCompare(b.tenantId) || a.name.localeCompare(b.name));
  }

  get size(): number {
    return this.rules.size;
  }

  /** When the rules were last known to be the database's: their last load, or a later look that found nothing written since (markCurrent). */
  get lastLoadedAt(): Date | null {
    return this.loadedAt;
  }

  /** The database was found to hold nothing written since the last load: the rules are as current as a load now would make them. */
  markCurrent(): void {
    if (this.loadedAt !== null) this.loadedAt = new Date();
  }

  private reindex(): void {
    this.index = new RuleIndex(this.rules.values());
  }
}
