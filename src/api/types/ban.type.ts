import { Field, ID, InputType, Int, ObjectType, registerEnumType } from "type-graphql";
import { BAN_DIMENSIONS, type BanDimension } from "../../domain/ban.js";
import { BAN_EVENT_KINDS, type BanEventKind } from "../../domain/events.js";
import { enumObject } from "./enums.js";

export const BanDimensionEnum = enumObject(BAN_DIMENSIONS);
export const BanEventKindEnum = enumObject(BAN_EVENT_KINDS);

registerEnumType(BanDimensionEnum, {
  name: "BanDimension",
  description: "Which of a request's identifiers a ban names; the value as bucket keys show it.",
  valuesConfig: {
    USER: { description: "The request's userId." },
    IP: { description: "The request's ip (either spelling of an address bans it)." },
    API_KEY: { description: "The request's apiKey, by the 22-character digest its bucket keys show (never the key itself)." },
    CLIENT: { description: "The request's CLIENT fingerprint, as its bucket keys show it." },
  },
});

registerEnumType(BanEventKindEnum, {
  name: "BanEventKind",
  valuesConfig: {
    BANNED: { description: "A ban placed, or an existing one given a new end (same id)." },
    UNBANNED: { description: "A ban lifted." },
  },
});

@ObjectType("Ban", {
  simpleResolvers: true,
  description: "One value of one identifier of a tenant's requests refused until `until`, on every instance, before any rule and without counting.",
})
export class BanType {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  tenantId!: string;

  @Field(() => BanDimensionEnum)
  dimension!: BanDimension;

  @Field(() => String)
  value!: string;

  @Field(() => Date, { description: "From then on the ban refuses nothing, on every instance." })
  until!: Date;

  @Field(() => String, { nullable: true })
  note!: string | null;

  @Field(() => Date)
  createdAt!: Date;

  @Field(() => String, { description: 'The API key that placed it ("bootstrap" for ADMIN_TOKEN), or "autoBan:<rule id>".' })
  createdBy!: string;
}

@InputType({ description: "A ban: give exactly one of until and durationSeconds. Banning a value already banned gives its ban the new end and note." })
export class BanInput {
  @Field(() => String)
  tenantId!: string;

  @Field(() => BanDimensionEnum)
  dimension!: BanDimension;

  @Field(() => String)
  value!: string;

  @Field(() => Date, { nullable: true })
  until?: Date | null;

  @Field(() => Int, { nullable: true })
  durationSeconds?: number | null;

  @Field(() => String, { nullable: true })
  note?: string | null;
}

@ObjectType("BanEvent", { simpleResolvers: true })
export class BanEventType {
  @Field(() => BanEventKindEnum)
  kind!: BanEventKind;

  @Field(() => String)
  tenantId!: string;

  @Field(() => ID, { nullable: true, description: "The rule whose autoBan placed the ban; null for one placed by hand, and for a lifting." })
  ruleId!: string | null;

  @Field(() => BanType)
  ban!: BanType;

  @Field(() => Date)
  at!: Date;
}

@ObjectType("AutoBan", {
  simpleResolvers: true,
  description: "Once one of the rule's buckets is refused `refusals` times within `withinSeconds`, its first USER, IP, API_KEY or CLIENT value is banned for `banSeconds` (docs/bans.md).",
})
export class AutoBanType {
  @Field(() => Int)
  refusals!: number;

  @Field(() => Int)
  withinSeconds!: number;

  @Field(() => Int)
  banSeconds!: number;
}

@InputType({ description: "A rule's automatic ban; the rule's scope must have USER, IP, API_KEY or CLIENT." })
export class AutoBanInput {
  @Field(() => Int, { description: "1 to 1,000,000." })
  refusals!: number;

  @Field(() => Int, { description: "1 to 86,400." })
  withinSeconds!: number;

  @Field(() => Int, { description: "1 to a year." })
  banSeconds!: number;
}
