/**
 * The browser the browser suites use starts here and renders a page of this
 * suite's own: a page loads, a click runs its script.
 */

import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { Browser } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchBrowser } from "../harness/browser.js";
import { CHROMIUM, chromiumAvailable } from "../support/services.js";

describe.runIf(await chromiumAvailable())("headless Chromium", () => {
  let browser: Browser;
  let server: Server;
  beforeAll(async () => {
    server = createServer((_, response) => {
      response.setHeader("content-type", "text/html; charset=utf-8");
      response.end(`<title>before</title><button onclick="document.title = 'after'">Go</button>`);
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    browser = await launchBrowser(CHROMIUM);
  });
  afterAll(async () => {
    await browser?.close();
    server?.close();
  });

  it("loads a page from localhost and runs its script on a click", async () => {
    const page = await browser.newPage();
    await page.goto(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    await page.getByRole("button", { name: "Go" }).click();
    expect(await page.title()).toBe("after");
  });
});
