/**
 * Writes schema.graphql from the code (npm run schema). The committed file is
 * what clients and codegen read; test/api/schema.test.ts fails when it is stale
 * or breaks the contract.
 */
import { writeFileSync } from "node:fs";
import { printSchema } from "graphql";
import { buildApiSchema } from "../src/api/schema.js";
import { InProcessEventBus } from "../src/store/memory/in-process-event-bus.js";

const path = new URL("../schema.graphql", import.meta.url);
writeFileSync(path, printSchema(await buildApiSchema(new InProcessEventBus())) + "\n");
console.log(`wrote ${path.pathname}`);
