// Bundles the dashboard (dashboard/) into dist/dashboard/: app.js (the
// TypeScript and graphql-ws, minified, one file), index.html, style.css and
// favicon.svg as they are. `npm run build` runs it, so `npm start` serves a current
// dashboard; the browser tests call buildDashboard() themselves.
import { copyFile, mkdir } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));

export async function buildDashboard() {
  const out = `${root}dist/dashboard/`;
  await mkdir(out, { recursive: true });
  await build({
    entryPoints: [`${root}dashboard/main.ts`],
    outfile: `${out}app.js`,
    bundle: true,
    format: "esm",
    target: "es2022",
    platform: "browser",
    minify: true,
    sourcemap: true,
    legalComments: "none",
    logLevel: "warning",
  });
  await Promise.all(["index.html", "style.css", "favicon.svg"].map((file) => copyFile(`${root}dashboard/${file}`, `${out}${file}`)));
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await buildDashboard();
