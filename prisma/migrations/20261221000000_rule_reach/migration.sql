-- A rule's reach: REGIONAL (each region enforces its limit on its own, as every rule did before) or GLOBAL (all regions share it).
-- CreateEnum
CREATE TYPE "Reach" AS ENUM ('REGIONAL', 'GLOBAL');

-- AlterTable
ALTER TABLE "rules" ADD COLUMN "reach" "Reach" NOT NULL DEFAULT 'REGIONAL';
