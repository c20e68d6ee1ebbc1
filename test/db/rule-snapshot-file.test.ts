import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { RuleSnapshotFile } from "../../src/db/rule-snapshot-file.js";
import { makeRule } from "../support/domain-factory.js";

const DATABASE = "postgresql://floodgate:secret@db.internal:6543/rules";

describe("RuleSnapshotFile", () => {
  const newPath = () => join(mkdtempSync(join(tmpdir(), "floodgate-snapshot-")), "rules-snapshot.json");

  it("reads back the rules it wrote, dates included, and names the database without its credentials", async () => {
    const path = newPath();
    const rule = makeRule({ id: "r1", limit: 7 });
    await new RuleSnapshotFile(path, DATABASE).write([rule]);
    const saved = await new RuleSnapshotFile(path, DATABASE).read();
    expect(saved?.items).toEqual([rule]);
    expect(saved?.savedAt).toBeInstanceOf(Date);
    const text = readFileSync(path, "utf8");
    expect(JSON.parse(text).database).toBe("db.internal:6543/rules");
    expect(text).not.toContain("secret");
  });

  it("keeps the rules of the last write when writes overlap, and leaves no temporary file behind", async () => {
    const path = newPath();
    const snapshot = new RuleSnapshotFile(path, DATABASE);
    await Promise.all(Array.from({ length: 20 }, (_, i) => snapshot.write([makeRule({ id: "r1", limit: i + 1 })])));
    expect((await snapshot.read())?.items.map((r) => r.limit)).toEqual([20]);
    expect(readdirSync(join(path, ".."))).toEqual(["rules-snapshot.json"]);
  });

  it("is not read by a service using another database; other credentials for the same database read it", async () => {
    const path = newPath();
    await new RuleSnapshotFile(path, DATABASE).write([makeRule()]);
    expect(await new RuleSnapshotFile(path, "postgresql://floodgate:secret@db.internal:6543/scratch").read()).toBeNull();
    expect(await new RuleSnapshotFile(path, "postgresql://floodgate:secret@other.internal:6543/rules").read()).toBeNull();
    expect(await new RuleSnapshotFile(path, "postgresql://reader:other@db.internal:6543/rules").read()).not.toBeNull();
  });

  it("reads no snapshot where there is no file", async () => {
    expect(await new RuleSnapshotFile(newPath(), DATABASE).read()).toBeNull();
  });
});
