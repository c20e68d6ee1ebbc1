/**
 * A bucket's field in its page is where its counts already are in Redis: a
 * change of how a field is formed would start every such bucket afresh after
 * a deploy. These cases pin the form, the digest computed here on its own.
 */

import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { KeyLayout } from "../../src/store/redis/key-layout.js";

const layout = new KeyLayout("fg:", 16_384);

describe("KeyLayout.field", () => {
  it("is the key itself up to 48 characters", () => {
    const key = `user:${"u".repeat(43)}`;
    expect(key).toHaveLength(48);
    expect(layout.field(key)).toBe(key);
  });

  it("is '#' and the first 22 base64url characters of the SHA-256 of a longer key (its UTF-8)", () => {
    for (const key of [`user:${"u".repeat(44)}`, `client:${"é".repeat(60)}`, `endpoint:GET /api/v1/${"segment/".repeat(10)}`]) {
      const digest = createHash("sha256").update(key, "utf8").digest("base64url").slice(0, 22);
      expect(layout.field(key)).toBe(`#${digest}`);
    }
  });

  it("keeps longer keys that differ in any character apart", () => {
    const base = "x".repeat(60);
    const fields = new Set([base, `${base}y`, `y${base}`, `${base.slice(0, 30)}y${base.slice(31)}`].map((key) => layout.field(key)));
    expect(fields.size).toBe(4);
  });
});
