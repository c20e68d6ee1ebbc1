/**
 * `npm run rules -- import|validate|export FILE`: rules as code from the
 * command line, against a running server (--url, --token) or straight against
 * the database the server uses (DATABASE_URL, or embedded storage in
 * DATA_DIR). Both do exactly what importRules and exportRules do.
 */

import { readFile, writeFile } from "node:fs/promises";
import { parseArgs } from "node:util";
import type { Logger } from "pino";
import { openRuleAdministration } from "../app.js";
import { loadSettings } from "../config/settings.js";
import { BOOTSTRAP } from "../engine/access/api-key-service.js";
import { describeProblem, type ImportProblem } from "../engine/rules/rule-import.js";

const USAGE = `usage: npm run rules -- <command> FILE [options]

commands:
  import FILE     check the whole file, then apply it: all of it, or nothing when anything is wrong
  validate FILE   report what importing FILE would do, changing nothing
  export FILE     write the stored rules to FILE ("-": standard output)

where the rules are:
  --url URL       a running Floodgate's GraphQL endpoint (or FLOODGATE_URL), e.g. http://localhost:4000/graphql
  --token TOKEN   bearer token sent to it (or FLOODGATE_TOKEN)
  without --url   the database itself, from the server's settings: DATABASE_URL, or embedded storage in DATA_DIR
                  (the fleet's Redis, REDIS_URL, REDIS_CLUSTER_NODES or REDIS_SENTINELS, and REDIS_KEY_PREFIX
                  tell running instances of the change at once; without them they see it at their next full
                  reload). DATA_DIR=memory:// validates a file on its own.

options:
  --tenant ID     export only this tenant's rules
  --dry-run       import: the same as validate
`;

interface ImportSummary {
  dryRun: boolean;
  applied: boolean;
  created: ImportedEntry[];
  updated: ImportedEntry[];
  unchanged: ImportedEntry[];
  invalid: ImportProblem[];
}

interface ImportedEntry {
  tenantId: string;
  name: string;
  line: number;
}

interface RulesTarget {
  importRules(yaml: string, dryRun: boolean): Promise<ImportSummary>;
  exportRules(tenantId: string | null): Promise<string>;
  close(): Promise<void>;
}

export interface CommandIo {
  out(text: string): void;
  err(text: string): void;
  logger: Logger;
}

/** Runs one command; the exit code: 0 done, 1 the file (or the target) has problems, 2 the command line is wrong. */
export async function runRulesCommand(argv: string[], env: NodeJS.ProcessEnv, io: CommandIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      options: { url: { type: "string" }, token: { type: "string" }, tenant: { type: "string" }, "dry-run": { type: "boolean" } },
    });
  } catch (error) {
    io.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const [command, file, ...extra] = parsed.positionals;
  if (!command || !["import", "validate", "export"].includes(command) || !file || extra.length > 0) {
    io.err(USAGE);
    return 2;
  }
  const url = parsed.values.url ?? env.FLOODGATE_URL;
  const target = url ? serverTarget(url, parsed.values.token ?? env.FLOODGATE_TOKEN) : await databaseTarget(env, io.logger);
  try {
    if (command === "export") {
      const yaml = await target.exportRules(parsed.values.tenant ?? null);
      if (file === "-") io.out(yaml);
      else await writeFile(file, yaml);
      return 0;
    }
    const report = await target.importRules(await readFile(file, "utf8"), command === "validate" || parsed.values["dry-run"] === true);
    io.out(describeReport(file, report));
    return report.invalid.length > 0 ? 1 : 0;
  } catch (error) {
    io.err(`${command} ${file} failed: ${(error as Error).message}\n`);
    return 1;
  } finally {
    await target.close();
  }
}

function describeReport(file: string, report: ImportSummary): string {
  const lines: string[] = [];
  for (const outcome of ["created", "updated", "unchanged"] as const) {
    for (const rule of report[outcome]) lines.push(`  ${outcome.padEnd(9)} ${rule.tenantId} / ${rule.name} (line ${rule.line})`);
  }
  for (const problem of report.invalid) lines.push(describeProblem(file, problem));
  const [created, updated] = report.applied ? ["created", "updated"] : ["to create", "to update"];
  const counts = `${report.created.length} ${created}, ${report.updated.length} ${updated}, ${report.unchanged.length} unchanged`;
  const verdict =
    report.invalid.length > 0
      ? `${report.invalid.length} problem${report.invalid.length === 1 ? "" : "s"}: nothing was written`
      : report.applied
        ? "applied"
        : "dry run: nothing was written";
  lines.push(`${file}: ${counts}; ${verdict}`);
  return lines.join("\n") + "\n";
}

const IMPORT_RULES = `mutation ImportRules($yaml: String!, $dryRun: Boolean) {
  importRules(yaml: $yaml, dryRun: $dryRun) {
    dryRun applied
    created { tenantId name line }
    updated { tenantId name line }
    unchanged { tenantId name line }
    invalid { line column field message }
  }
}`;

const EXPORT_RULES = `query ExportRules($tenantId: String) { exportRules(tenantId: $tenantId) }`;

function serverTarget(url: string, token: string | undefined): RulesTarget {
  const request = async <T>(query: string, variables: Record<string, unknown>): Promise<T> => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json().catch(() => null)) as { data?: T; errors?: { message: string }[] } | null;
    if (body?.errors?.length || !body?.data) {
      throw new Error(body?.errors?.map((e) => e.message).join("; ") ?? `${url} answered HTTP ${response.status}`);
    }
    return body.data;
  };
  return {
    importRules: async (yaml, dryRun) => (await request<{ importRules: ImportSummary }>(IMPORT_RULES, { yaml, dryRun })).importRules,
    exportRules: async (tenantId) => (await request<{ exportRules: string }>(EXPORT_RULES, { tenantId })).exportRules,
    close: async () => {},
  };
}

async function databaseTarget(env: NodeJS.ProcessEnv, logger: Logger): Promise<RulesTarget> {
  const administration = await openRuleAdministration(loadSettings(env), logger);
  return {
    // Straight at the database, the command has every right its credentials give: it acts as the bootstrap admin.
    importRules: (yaml, dryRun) => administration.rules.importRules(BOOTSTRAP, yaml, { dryRun }),
    exportRules: (tenantId) => administration.rules.exportRules(BOOTSTRAP, tenantId),
    close: () => administration.close(),
  };
}
