-- CreateEnum
CREATE TYPE "RuleChangeKind" AS ENUM ('CREATED', 'UPDATED', 'DELETED');

-- CreateTable
CREATE TABLE "rule_revisions" (
    "rule_id" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "kind" "RuleChangeKind" NOT NULL,
    "changed_at" TIMESTAMPTZ(3) NOT NULL,
    "actor" TEXT,
    "note" TEXT,
    "before" JSONB,
    "after" JSONB,

    CONSTRAINT "rule_revisions_pkey" PRIMARY KEY ("rule_id","version")
);

-- CreateIndex
CREATE INDEX "rule_revisions_tenant_id_changed_at_idx" ON "rule_revisions"("tenant_id", "changed_at");

-- Rules that existed before history began get one revision holding them as they
-- are, in the shape the service writes, so that they too can be rolled back to it.
INSERT INTO "rule_revisions" ("rule_id", "version", "tenant_id", "kind", "changed_at", "note", "before", "after")
SELECT "id", "version", "tenant_id",
       CASE WHEN "version" = 1 THEN 'CREATED'::"RuleChangeKind" ELSE 'UPDATED'::"RuleChangeKind" END,
       "updated_at", 'recorded when rule history began', NULL,
       jsonb_build_object(
         'id', "id", 'tenantId', "tenant_id", 'name', "name", 'scope', to_jsonb("scope"), 'resource', "resource",
         'method', "method", 'algorithm', "algorithm", 'limit', "limit", 'window', "window", 'windowUnit', "window_unit",
         'burst', "burst", 'action', "action", 'failureMode', "failure_mode", 'priority', "priority", 'enabled', "enabled",
         'version', "version", 'createdAt', "created_at", 'updatedAt', "updated_at")
FROM "rules";
