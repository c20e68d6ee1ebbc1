-- Overrides: one rule's limit replaced for one identifier (exact, glob, or CIDR block for IP). They go with their
-- rule (deleted with it); a change to one is a revision of the rule, whose new column holds the override before and after.
-- CreateEnum
CREATE TYPE "OverrideMatch" AS ENUM ('EXACT', 'GLOB', 'CIDR');

-- CreateTable
CREATE TABLE "rule_overrides" (
    "id" TEXT NOT NULL,
    "rule_id" TEXT NOT NULL,
    "tenant_id" TEXT NOT NULL,
    "target" TEXT NOT NULL,
    "match" "OverrideMatch" NOT NULL,
    "identifier" TEXT NOT NULL,
    "limit" INTEGER NOT NULL,
    "burst" INTEGER,
    "window" INTEGER,
    "window_unit" "WindowUnit",
    "expires_at" TIMESTAMPTZ(3),
    "note" TEXT,
    "actor" TEXT,
    "version" INTEGER NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "rule_overrides_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "rule_overrides_rule_id_target_match_identifier_key" ON "rule_overrides"("rule_id", "target", "match", "identifier");

-- AddForeignKey
ALTER TABLE "rule_overrides" ADD CONSTRAINT "rule_overrides_rule_id_fkey" FOREIGN KEY ("rule_id") REFERENCES "rules"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AlterTable
ALTER TABLE "rule_revisions" ADD COLUMN "override" JSONB;
