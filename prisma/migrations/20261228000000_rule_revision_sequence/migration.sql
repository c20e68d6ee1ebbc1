-- Every revision takes a number from one sequence, so that the rules' change mark reads the latest one through an index
-- instead of counting the whole history (src/db/prisma-rule-repository.ts, changeMark). Existing revisions are numbered
-- in the table's order; only the largest number is ever read.
-- AlterTable
ALTER TABLE "rule_revisions" ADD COLUMN "seq" BIGSERIAL NOT NULL;

-- CreateIndex
CREATE UNIQUE INDEX "rule_revisions_seq_key" ON "rule_revisions"("seq");
