/**
 * GraphiQL as a person uses it, in headless Chromium against a started
 * Floodgate: the page loads from /graphql with its assets from the
 * installed packages (every request the page makes stays on Floodgate's
 * origin), the token typed into the headers editor reads the schema, the
 * documentation explorer lists checkLimits, and a check typed into the
 * editor returns a decision.
 */

import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../harness/browser.js";
import type { TestApp } from "../harness/in-process-app.js";
import { newTenant } from "../support/api.js";
import { startTestApp } from "../support/app.js";
import { CHROMIUM, chromiumAvailable } from "../support/services.js";

describe.runIf(await chromiumAvailable())("GraphiQL in headless Chromium", () => {
  let browser: Browser;
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp("embedded");
    browser = await launchBrowser(CHROMIUM);
  });
  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  /** Replaces the text of the CodeMirror editor inside `container` (inserted as text, so no bracket is closed for us). */
  async function replaceEditorText(page: Page, container: string, text: string): Promise<void> {
    await page.locator(`${container} .CodeMirror >> visible=true`).click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.insertText(text);
  }

  it("loads offline from Floodgate, reads the schema with the token from its headers editor, lists checkLimits and runs a check", async () => {
    const origin = new URL(t.app.url).origin;
    const page = await browser.newPage();
    page.setDefaultTimeout(5_000);
    const elsewhere: string[] = [];
    page.on("request", (request) => {
      if (!request.url().startsWith(origin)) elsewhere.push(request.url());
    });
    const failures: string[] = [];
    page.on("pageerror", (error) => failures.push(error.message));

    const response = await page.goto(t.app.url);
    expect(response?.status()).toBe(200);
    await page.locator(".graphiql-container").waitFor();

    await page.getByRole("button", { name: "Headers" }).click();
    await replaceEditorText(page, ".graphiql-editor-tool", JSON.stringify({ Authorization: `Bearer ${t.adminToken}` }));
    // GraphiQL takes an edit of the headers in after a debounce: the schema is re-read until it is read with the token.
    await page.getByRole("button", { name: "Show Documentation Explorer" }).click();
    const explorer = page.locator(".graphiql-doc-explorer");
    await expect
      .poll(async () => {
        await page.getByRole("button", { name: "Re-fetch GraphQL schema" }).click();
        return explorer.getByText("Query", { exact: true }).count();
      })
      .toBeGreaterThan(0);
    await explorer.getByText("Query", { exact: true }).click();
    await explorer.getByText("checkLimits", { exact: true }).waitFor();

    const tenantId = newTenant();
    await replaceEditorText(page, ".graphiql-query-editor", `{ checkLimits(request: { tenantId: "${tenantId}", resource: "/orders" }) { allowed remaining } }`);
    await page.getByRole("button", { name: "Execute query (Ctrl-Enter)" }).click();
    await expect.poll(async () => (await page.locator(".graphiql-response").innerText()).replace(/\s+/g, "")).toContain('{"data":{"checkLimits":{"allowed":true,"remaining":');

    expect(elsewhere).toEqual([]);
    expect(failures).toEqual([]);
  }, 60_000);
});
