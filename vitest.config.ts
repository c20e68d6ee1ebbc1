import { createRequire } from "node:module";
import { defaultServerConditions } from "vite";
import { configDefaults, defineConfig } from "vitest/config";

const require = createRequire(import.meta.url);

/**
 * The files that build the package (`npm run build`) and then run what they built. Two
 * at once would have one tsc rewrite dist/ while the other's processes load it, so they
 * run one at a time, after the rest of the suite.
 */
const BUILDING = ["test/client/package.test.ts", "test/bench/bench-smoke.test.ts"];

export default defineConfig({
  resolve: {
    // graphql ships a CommonJS and an ES module build, and its classes check
    // which copy made a schema. The service (Apollo, type-graphql) loads the
    // CommonJS one through Node; tests must import that same copy.
    alias: [{ find: /^graphql$/, replacement: require.resolve("graphql") }],
  },
  ssr: {
    // package.json "exports" and "imports" send this condition to the sources: tests import
    // "floodgate/client", "floodgate/express"... as users do, without a build.
    resolve: { conditions: ["floodgate-source", ...defaultServerConditions] },
  },
  test: {
    setupFiles: ["test/support/setup.ts"],
    testTimeout: 20_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        // Vitest's default is one file at a time on two cores (the CPUs less one). Most files
        // spend their time waiting on the servers they start: two at a time took the whole
        // suite from 13 to 9.5 minutes on this project's 2-core machine, every test passing.
        test: { name: "suite", include: ["test/**/*.test.ts"], exclude: [...configDefaults.exclude, ...BUILDING], maxWorkers: 2 },
      },
      { extends: true, test: { name: "building", include: BUILDING, maxWorkers: 1, sequence: { groupOrder: 1 } } },
    ],
  },
});
