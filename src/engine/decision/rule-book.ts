/**
 * The rules this instance enforces, compiled, in memory: a check never reads
 * the database. Changes arrive as RuleChanges (this instance's own and every
 * other instance's, through RuleSync) and full reloads; a rule never goes back
 * to an older version than one already seen.
 */

import type { RuleChange } from "../../domain/events.js";
import type { Rule } from "../../domain/rule.js";
import { compileRule, type CompiledRule } from "./compiled-rule.js";
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
  load(rules: readonly Rule[], since: number = this.changes): void {
    const fresh = new Map<string, CompiledRule>();
    for (const rule of rules) {
      if ((this.deleted.get(rule.id) ?? 0) >= rule.version) continue;
      const known = this.rules.get(rule.id);
      fresh.set(rule.id, known && known.rule.version >= rule.version ? known : compileRule(rule));
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
    this.loadedAt = new Date();
    this.reindex();
  }

  /**
   * Applies one change; false when it is not newer than what the book holds.
   * A deletion is final (ids are never reused), whatever its version.
   */
  apply(change: RuleChange): boolean {
    const known = this.rules.get(change.ruleId)?.rule.version ?? this.deleted.get(change.ruleId) ?? 0;
    const deletion = change.kind === "DELETED" || change.rule === null;
    if (deletion ? this.deleted.has(change.ruleId) : change.version <= known) return false;
    if (deletion) {
      this.rules.delete(change.ruleId);
      this.deleted.set(change.ruleId, Math.max(known, change.version));
    } else {
      this.rules.set(change.ruleId, compileRule(change.rule!));
    }
    this.appliedAt.set(change.ruleId, ++this.changes);
    this.reindex();
    return true;
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

  get lastLoadedAt(): Date | null {
    return this.loadedAt;
  }

  private reindex(): void {
    this.index = new RuleIndex(this.rules.values());
  }
}
