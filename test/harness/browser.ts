/**
 * A headless Chromium for the browser suites: Debian's chromium package,
 * driven by playwright-core, which never downloads a browser of its own. The
 * flags keep it off the network it cannot reach here (component updates,
 * sync, background requests), and from needing a sandbox or a GPU as root.
 */

import { chromium, type Browser } from "playwright-core";

const FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export function launchBrowser(executablePath: string): Promise<Browser> {
  return chromium.launch({ executablePath, headless: true, args: FLAGS });
}
