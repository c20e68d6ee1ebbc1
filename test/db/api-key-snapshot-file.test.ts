import { mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ApiKeySnapshotFile } from "../../src/db/api-key-snapshot-file.js";
import type { ApiKeyCredential } from "../../src/domain/ports.js";

const DATABASE = "postgresql://floodgate:secret@db.internal:6543/rules";
const KEYS: ApiKeyCredential[] = [
  { secretHash: "a".repeat(64), principal: { keyId: "k1", tenantId: "acme", role: "CHECKER" }, revokedAt: null },
  { secretHash: "b".repeat(64), principal: { keyId: "k2", tenantId: "*", role: "ADMIN" }, revokedAt: new Date("2026-11-30T12:00:00.123Z") },
];

describe("ApiKeySnapshotFile", () => {
  const newPath = () => join(mkdtempSync(join(tmpdir(), "floodgate-key-snapshot-")), "api-keys-snapshot.json");

  it("reads back the credentials it wrote, revocation times included, from a file only its owner can read", async () => {
    const path = newPath();
    await new ApiKeySnapshotFile(path, DATABASE).write(KEYS);
    expect((await new ApiKeySnapshotFile(path, DATABASE).read())?.items).toEqual(KEYS);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, "utf8")).database).toBe("db.internal:6543/rules");
  });

  it("is not read by a service using another database", async () => {
    const path = newPath();
    await new ApiKeySnapshotFile(path, DATABASE).write(KEYS);
    expect(await new ApiKeySnapshotFile(path, "postgresql://floodgate:secret@db.internal:6543/scratch").read()).toBeNull();
  });
});
