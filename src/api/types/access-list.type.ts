import { Field, ID, InputType, ObjectType } from "type-graphql";
import type { AccessList, ListEntry, ListEntryChangeKind, ListEntryKind } from "../../domain/access-list.js";
import { AccessListEnum, ListEntryChangeKindEnum, ListEntryKindEnum } from "./enums.js";

@ObjectType("ListEntry", { simpleResolvers: true, description: "An identifier a tenant (or every tenant, \"*\") always refuses or always lets through." })
export class ListEntryType {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  tenantId!: string;

  @Field(() => AccessListEnum)
  list!: AccessList;

  @Field(() => ListEntryKindEnum)
  kind!: ListEntryKind;

  @Field(() => String, { description: "Canonical: a block by its network address, a user-agent glob in lower case, an API key as its digest." })
  value!: string;

  @Field(() => String, { nullable: true })
  note!: string | null;

  @Field(() => Date, { nullable: true, description: "From then on the entry no longer applies, on every instance; null: until it is removed." })
  expiresAt!: Date | null;

  @Field(() => Date)
  createdAt!: Date;

  @Field(() => String, { description: "The API key that added it (\"bootstrap\" for ADMIN_TOKEN)." })
  createdBy!: string;
}

@ObjectType("ListEntryChange", { simpleResolvers: true, description: "An access list entry added or removed, kept in its tenant's list history." })
export class ListEntryChangeType {
  @Field(() => ListEntryChangeKindEnum)
  kind!: ListEntryChangeKind;

  @Field(() => ListEntryType, { description: "The entry as it was added, or as it was when removed." })
  entry!: ListEntry;

  @Field(() => Date)
  at!: Date;

  @Field(() => String, { nullable: true, description: "The API key that made the change." })
  actor!: string | null;
}

@InputType()
export class AddListEntryInput {
  @Field(() => String, { description: 'The tenant whose list it is; "*" for every tenant (ADMIN only).' })
  tenantId!: string;

  @Field(() => AccessListEnum)
  list!: AccessList;

  @Field(() => ListEntryKindEnum)
  kind!: ListEntryKind;

  @Field(() => String)
  value!: string;

  @Field(() => String, { nullable: true, description: "Why the entry is there, for the next person." })
  note?: string | null;

  @Field(() => Date, { nullable: true, description: "When the entry stops applying (in the future); null: until it is removed." })
  expiresAt?: Date | null;
}
