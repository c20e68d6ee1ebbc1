/**
 * The dashboard in headless Chromium against a real Floodgate (Postgres and
 * Redis): signing in with a key, a throttle event caused through the API
 * shown within a second, a ban and its lifting shown among the live events, a rule's usage chart moving, a rule created with an
 * invalid field (the error beside it), fixed, changed and rolled back, a shadow
 * rule's would-be refusals and its promotion, a YAML import after its dry run,
 * a flood of events drawn as a bounded list. Each main view's screenshot is
 * written to docs/screenshots/.
 */

import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildDashboard } from "../../scripts/build-dashboard.mjs";
import { launchBrowser } from "../harness/browser.js";
import type { TestApp } from "../harness/in-process-app.js";
import { BanDocument, BansDocument, CheckLimitsBatchDocument, CreateApiKeyDocument, GetRuleDocument, ListRulesDocument, UnbanDocument } from "../generated/graphql.js";
import { check, createRule, newTenant, realStorageAvailable, sleep } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import { startInProcessApp } from "../harness/in-process-app.js";
import { startOwnRedis } from "../harness/redis-server.js";
import { CHROMIUM, chromiumAvailable, redisBinariesAvailable } from "../support/services.js";

const SCREENSHOTS = fileURLToPath(new URL("../../docs/screenshots/", import.meta.url));
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

describe.runIf((await chromiumAvailable()) && (await realStorageAvailable()))("the dashboard in Chromium", () => {
  let t: TestApp;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let dashboard: string;
  const tenantId = newTenant();
  let token: string;
  /** Exceptions no screen caught: there must be none. */
  const pageErrors: string[] = [];

  beforeAll(async () => {
    await buildDashboard();
    mkdirSync(SCREENSHOTS, { recursive: true });
    t = await startTestApp("real", { USAGE_FLUSH_MS: "200" });
    dashboard = t.app.url.replace(/\/graphql$/, "/dashboard");
    const { createApiKey } = await t.client.data(CreateApiKeyDocument, { input: { tenantId, role: "TENANT_ADMIN", name: "operator" } });
    token = createApiKey.secret;
    browser = await launchBrowser(CHROMIUM);
    context = await browser.newContext({ viewport: DESKTOP });
    // An action or a wait that cannot succeed fails in seconds, naming what it waited for.
    context.setDefaultTimeout(5_000);
    page = await context.newPage();
    page.on("pageerror", (error) => pageErrors.push(error.message));
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  async function goTo(hash: string): Promise<void> {
    await page.evaluate(`location.hash = ${JSON.stringify(hash)}`);
  }

  it("signs in with a key from the keyboard, refusing a wrong one, and keeps the key for the tab only", async () => {
    await page.goto(dashboard);
    await page.getByLabel("API key").fill("fg_not_a_key_at_all_0000");
    await page.keyboard.press("Enter");
    await page.getByText("This key is not valid.").waitFor();
    await page.getByLabel("API key").fill(token);
    await page.keyboard.press("Enter");
    await page.getByRole("navigation", { name: "Screens" }).waitFor();
    expect(await page.evaluate("[sessionStorage.length, localStorage.length, document.cookie]")).toEqual([1, 0, ""]);
    await page.getByText(/1 instance/).waitFor();
  });

  it("shows a throttle event within a second of a refused check made through the API", async () => {
    const rule = await createRule(t.client, { tenantId, name: "per-user", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES", resource: "/live" });
    await goTo("#live");
    await page.getByRole("heading", { name: "Live throttling" }).waitFor();
    // Until a first event arrives, the subscription may not be listening yet: refuse checks of one bucket until it shows.
    for (let seen = false; !seen; ) {
      await check(t.client, { tenantId, userId: "warm-up", resource: "/live", cost: 2 });
      seen = await page
        .locator(".event.throttle", { hasText: "user:warm-up" })
        .first()
        .waitFor({ timeout: 500 })
        .then(() => true, () => false);
    }
    // A bucket of its own: its first event goes out at once, not at the end of a coalescing interval.
    expect((await check(t.client, { tenantId, userId: "u1", resource: "/live" })).allowed).toBe(true);
    const refused = await check(t.client, { tenantId, userId: "u1", resource: "/live" });
    expect(refused.allowed).toBe(false);
    const row = page.locator(".event.throttle", { hasText: "user:u1" });
    await row.waitFor({ timeout: 1_000 });
    expect(await row.textContent()).toContain(rule.name);
    // The top buckets are read again every 5 s.
    await page.locator("tbody tr", { hasText: "user:warm-up" }).waitFor({ timeout: 12_000 });
    await page.screenshot({ path: `${SCREENSHOTS}live.png` });
  });

  it("shows a ban placed and lifted through the API among the live events", async () => {
    await goTo("#live");
    await page.getByRole("heading", { name: "Live throttling" }).waitFor();
    // Until a first ban shows, the subscription may not be listening yet: ban new users until one does.
    let banned = "";
    for (let attempt = 0; banned === ""; attempt++) {
      const value = `troll-${attempt}`;
      await t.client.data(BanDocument, { input: { tenantId, dimension: "USER", value, durationSeconds: 600, note: "dashboard test" } });
      const shown = await page
        .locator(".event.ban", { hasText: `user:${value}` })
        .waitFor({ timeout: 500 })
        .then(() => true, () => false);
      if (shown) banned = value;
    }
    const row = page.locator(".event.ban", { hasText: `user:${banned}` });
    expect(await row.textContent()).toMatch(/banned.*by hand.*until/);
    const { bans } = await t.client.data(BansDocument, { tenantId });
    await t.client.data(UnbanDocument, { id: bans.find((b) => b.value === banned)!.id });
    await page.locator(".event.unban", { hasText: `user:${banned}` }).waitFor({ timeout: 1_000 });
    expect(await page.locator(".event.unban", { hasText: `user:${banned}` }).textContent()).toContain("lifted");
  });

  it("filters events by action and shadow, and draws a flood as a list of at most 200 rows", async () => {
    await createRule(t.client, { tenantId, name: "flood", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES", resource: "/flood" });
    // The screen lists the rules there are when it opens.
    await goTo("#rules");
    await goTo("#live");
    await page.getByRole("heading", { name: "Live throttling" }).waitFor();
    await page.getByLabel("Shadow").selectOption("yes");
    await check(t.client, { tenantId, userId: "hidden", resource: "/flood", cost: 2 });
    await page.getByLabel("Shadow").selectOption("");
    // Events are filtered by rule on the server: with the filter on "flood", a refusal of "per-user" made just before one of
    // "flood" never shows, though it would arrive first.
    await page.getByLabel("Rule", { exact: true }).selectOption({ label: `flood (${tenantId})` });
    for (let i = 0, seen = false; !seen; i++) {
      await check(t.client, { tenantId, userId: `filtered-out-${i}`, resource: "/live", cost: 2 });
      await check(t.client, { tenantId, userId: `filtered-in-${i}`, resource: "/flood", cost: 2 });
      seen = await page
        .locator(".event", { hasText: `user:filtered-in-${i}` })
        .waitFor({ timeout: 500 })
        .then(() => true, () => false);
    }
    expect(await page.locator(".event", { hasText: "user:filtered-out" }).count()).toBe(0);
    // 1,000 buckets refused in a second, 250 at a time: a throttle event each (cost 2 exceeds every bucket's capacity).
    for (let batch = 0; batch < 4; batch++) {
      const requests = Array.from({ length: 250 }, (_, i) => ({ tenantId, userId: `flood-${batch * 250 + i}`, resource: "/flood", cost: 2 }));
      await t.client.data(CheckLimitsBatchDocument, { requests });
      await sleep(250);
    }
    await page.locator(".event", { hasText: "user:flood-999" }).waitFor();
    await page.getByRole("status").filter({ hasText: /events received/ }).filter({ hasText: /200 shown/ }).waitFor();
    expect(await page.locator(".event").count()).toBe(200);
    expect(await page.locator(".event", { hasText: "user:hidden" }).count()).toBe(0);
    await page.getByRole("button", { name: "Pause" }).click();
    expect(await page.getByRole("button", { name: "Resume" }).getAttribute("aria-pressed")).toBe("true");
    await page.getByRole("button", { name: "Resume" }).click();
  });

  it("moves a rule's usage chart when checks are refused", async () => {
    const rule = await createRule(t.client, { tenantId, name: "charted", scope: ["USER"], limit: 2, window: 1, windowUnit: "MINUTES", resource: "/charted" });
    await goTo(`#usage/${rule.id}`);
    const refused = page.locator('dd[data-series="refused"]');
    await refused.waitFor();
    expect(await refused.textContent()).toBe("0");
    for (let i = 0; i < 5; i++) await check(t.client, { tenantId, userId: "charted", resource: "/charted" });
    // The chart reloads every 5 s, and the counts reach the store within a flush (200 ms here).
    await page.locator('dd[data-series="refused"]', { hasText: "3" }).waitFor({ timeout: 15_000 });
    expect(await page.locator('dd[data-series="allowed"]').textContent()).toBe("2");
    expect(await page.locator("svg.chart rect.bar.refused").count()).toBeGreaterThan(0);
    expect(await page.locator("svg.chart").getAttribute("aria-label")).toContain("refused 3");
    await page.screenshot({ path: `${SCREENSHOTS}usage.png` });
  });

  it("creates a rule, showing the API's error next to the invalid field, then edits it and rolls it back", async () => {
    await goTo("#rules/new");
    await page.getByLabel("Tenant", { exact: true }).fill(tenantId);
    await page.getByLabel("Name").fill("orders");
    await page.getByLabel("Limit").fill("0");
    await page.getByLabel("Window", { exact: true }).fill("1");
    await page.getByLabel("USER").check();
    await page.getByRole("button", { name: "Create rule" }).click();
    const limitError = page.locator(`#${await page.getByLabel("Limit").getAttribute("id")}-error`);
    await limitError.filter({ hasText: "input.limit must be at least 1 (got 0)" }).waitFor();
    expect(await page.getByLabel("Limit").getAttribute("aria-invalid")).toBe("true");
    expect(await page.evaluate("document.activeElement.id")).toBe(await page.getByLabel("Limit").getAttribute("id"));

    await page.getByLabel("Limit").fill("5");
    await page.getByRole("button", { name: "Create rule" }).click();
    await page.getByRole("heading", { name: /orders.*version 1/ }).waitFor();
    const id = decodeURIComponent(new URL(page.url()).hash.split("/")[1]!);

    await page.getByLabel("Limit").fill("10");
    await page.getByRole("button", { name: "Save changes" }).click();
    await page.getByRole("heading", { name: /orders.*version 2/ }).waitFor();
    const change = page.locator(".history li", { hasText: "Version 2" });
    // The history is fetched after the saved rule shows: wait for its change to be drawn.
    await change.locator(".diff tbody tr").first().waitFor();
    expect(await change.locator(".diff tbody tr").allTextContents()).toEqual(["limit510"]);

    await page.getByRole("button", { name: "Roll back to version 1" }).click();
    await page.getByRole("heading", { name: /orders.*version 3/ }).waitFor();
    await page.locator(".history li", { hasText: "rolled back to version 1" }).waitFor();
    const { rule } = await t.client.data(GetRuleDocument, { id });
    expect(rule).toMatchObject({ name: "orders", limit: 5, version: 3 });
    await page.screenshot({ path: `${SCREENSHOTS}rule.png`, fullPage: true });

    await goTo("#rules");
    await page.getByLabel("Search rules").fill("orders");
    expect(await page.locator("tbody tr").count()).toBe(1);
  });

  it("shows what a shadow rule would have refused, and promotes it to enforcement", async () => {
    const rule = await createRule(t.client, { tenantId, name: "shadowed", scope: ["USER"], limit: 1, window: 1, windowUnit: "MINUTES", resource: "/shadowed", action: "LOG_ONLY" });
    for (let i = 0; i < 4; i++) expect((await check(t.client, { tenantId, userId: "s1", resource: "/shadowed" })).allowed).toBe(true);
    // Its page reads the usage once: open it once the counts are in the store (a flush is 200 ms here).
    for (let shown = false; !shown; ) {
      await goTo("#rules");
      await goTo(`#rules/${rule.id}`);
      shown = await page
        .getByText("In the last hour this rule would have refused 3 of 4 checks it decided.")
        .waitFor({ timeout: 1_000 })
        .then(() => true, () => false);
    }
    await page.getByRole("button", { name: "Promote to enforcement (REJECT)" }).click();
    await page.getByRole("heading", { name: /shadowed.*version 2/ }).waitFor();
    await page.locator(".history li", { hasText: "promoted from LOG_ONLY to REJECT" }).waitFor();
    expect(await page.getByRole("button", { name: "Promote to enforcement (REJECT)" }).count()).toBe(0);
    expect((await t.client.data(GetRuleDocument, { id: rule.id })).rule).toMatchObject({ action: "REJECT", version: 2 });
    expect((await check(t.client, { tenantId, userId: "s1", resource: "/shadowed" })).allowed).toBe(false);
  });

  it("imports a YAML file after a dry run, refusing to apply before one, and shows an invalid file's problems by line", async () => {
    await goTo("#file");
    const apply = page.getByRole("button", { name: "Apply" });
    await page.getByLabel("YAML file").setInputFiles({ name: "bad.yaml", mimeType: "text/yaml", buffer: Buffer.from(`rules:\n  - tenantId: ${tenantId}\n    name: imported\n    limit: -1\n    window: 1\n`) });
    await page.getByRole("button", { name: "Dry run" }).click();
    await page.getByText("The file is invalid: nothing was written.").waitFor();
    await page.locator(".problems li", { hasText: "line 4" }).filter({ hasText: "rules[0].limit" }).waitFor();
    expect(await apply.isDisabled()).toBe(true);

    await page.getByLabel("YAML file").setInputFiles({ name: "rules.yaml", mimeType: "text/yaml", buffer: Buffer.from(`rules:\n  - tenantId: ${tenantId}\n    name: imported\n    limit: 7\n    window: 1\n    windowUnit: MINUTES\n`) });
    expect(await apply.isDisabled()).toBe(true);
    await page.getByRole("button", { name: "Dry run" }).click();
    await page.getByText("Dry run: the file is valid, nothing was written yet.").waitFor();
    await page.getByText(/Would create.*1: imported/s).waitFor();
    const before = (await t.client.data(ListRulesDocument, { tenantId })).rules.map((r) => r.name);
    expect(before).not.toContain("imported");
    await page.screenshot({ path: `${SCREENSHOTS}import.png` });
    await apply.click();
    await page.getByText("Applied.").waitFor();
    const after = (await t.client.data(ListRulesDocument, { tenantId })).rules.find((r) => r.name === "imported");
    expect(after).toMatchObject({ limit: 7, windowUnit: "MINUTES" });

    await page.getByRole("button", { name: "Export" }).click();
    await page.getByRole("link", { name: "Download rules.yaml" }).waitFor();
    expect(await page.getByLabel("Exported rules").inputValue()).toContain("name: imported");
  });

  it("fits a phone's width without scrolling sideways", async () => {
    const phone = await browser.newContext({ viewport: PHONE });
    try {
      const small = await phone.newPage();
      await small.goto(dashboard);
      await small.getByLabel("API key").fill(token);
      await small.getByRole("button", { name: "Sign in" }).click();
      await small.getByRole("heading", { name: "Live throttling" }).waitFor();
      expect(await small.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(PHONE.width);
      await small.evaluate('location.hash = "#rules"');
      await small.getByRole("heading", { name: "Rules" }).waitFor();
      expect(await small.evaluate<number>("document.documentElement.scrollWidth")).toBeLessThanOrEqual(PHONE.width);
      await small.screenshot({ path: `${SCREENSHOTS}rules-phone.png` });
    } finally {
      await phone.close();
    }
  });

  it("signs out, forgetting the key", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API key").waitFor();
    expect(await page.evaluate("sessionStorage.length")).toBe(0);
    expect(pageErrors).toEqual([]);
  });
});

describe.runIf((await chromiumAvailable()) && (await redisBinariesAvailable()))("the dashboard's health banner in Chromium", () => {
  it("says decisions are degraded once the counter store's breaker opens", { timeout: 30_000 }, async () => {
    const redis = await startOwnRedis();
    const t = await startInProcessApp({ REDIS_URL: redis.url, REDIS_TIMEOUT_MS: "200", REDIS_BREAKER_FAILURES: "1", REDIS_BREAKER_OPEN_MS: "60000" });
    const browser = await launchBrowser(CHROMIUM);
    try {
      await buildDashboard();
      const page = await browser.newPage({ viewport: DESKTOP });
      page.setDefaultTimeout(10_000);
      await page.goto(t.app.url.replace(/\/graphql$/, "/dashboard"));
      await page.getByLabel("API key").fill(t.adminToken);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("heading", { name: "Live throttling" }).waitFor();
      expect(await page.locator(".banner").count()).toBe(0);
      const tenantId = newTenant();
      await createRule(t.client, { tenantId, name: "per-user", scope: ["USER"], limit: 5, window: 1, windowUnit: "MINUTES" });
      await redis.kill();
      expect((await check(t.client, { tenantId, userId: "u1" })).degraded).toBe(true);
      // The banner reads health every 5 s.
      await page.locator(".banner.danger", { hasText: "Degraded:" }).waitFor();
      expect(await page.locator(".banner.danger").textContent()).toContain("open");
      await page.getByText("instances unknown · 1 rule").waitFor();
      // Usage cannot be read meanwhile, and the page says why rather than "Internal server error".
      await page.locator(".errors .error", { hasText: "usage cannot be read now: the counter store is unreachable" }).first().waitFor();
      await page.screenshot({ path: `${SCREENSHOTS}degraded.png` });
    } finally {
      await browser.close();
      await t.stop();
      await redis.stop();
    }
  });
});
