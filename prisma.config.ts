import { defineConfig } from "prisma/config";

// The service applies prisma/migrations itself (src/db/migrations.ts); this file
// lets the Prisma CLI (generate, and migrate deploy / status where the native
// schema engine can be downloaded) find the same schema and migrations.
export default defineConfig({
  schema: "prisma/schema.prisma",
  migrations: { path: "prisma/migrations" },
  datasource: { url: process.env.DATABASE_URL ?? "postgresql://postgres@127.0.0.1:5432/floodgate" },
});
