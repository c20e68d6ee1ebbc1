// Bundles the dashboard (dashboard/) into dist/dashboard/: app.js (the
// TypeScript and graphql-ws, minified, one file), index.html, style.css and
// favicon.svg as they are. `npm run build` runs it, so `npm start` serves a
// current dashboard; the browser tests call buildDashboard() themselves.
//
// Each file is written beside the others first and then renamed into place,
// so that a server reading dist/dashboard/ while another build runs (test
// files run in parallel) reads a whole file, the old one or the new one.
import { copyFile, mkdir, mkdtemp, rename, rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const FILES = ["app.js", "app.js.map", "index.html", "style.css", "favicon.svg"];

export async function buildDashboard() {
  const out = `${root}dist/dashboard/`;
  await mkdir(out, { recursive: true });
  const staging = `${await mkdtemp(`${root}dist/.dashboard-`)}/`;
  try {
    await build({
      entryPoints: [`${root}dashboard/main.ts`],
      outfile: `${staging}app.js`,
      bundle: true,
      format: "esm",
      target: "es2022",
      platform: "browser",
      minify: true,
      sourcemap: true,
      legalComments: "none",
      logLevel: "warning",
    });
    await Promise.all(["index.html", "style.css", "favicon.svg"].map((file) => copyFile(`${root}dashboard/${file}`, `${staging}${file}`)));
    for (const file of FILES) await rename(`${staging}${file}`, `${out}${file}`);
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildDashboard();
