import { Field, ID, InputType, ObjectType, registerEnumType } from "type-graphql";
import { ROLES, type Role } from "../../domain/access.js";
import { enumObject } from "./enums.js";

export const RoleEnum = enumObject(ROLES);

registerEnumType(RoleEnum, {
  name: "Role",
  valuesConfig: {
    ADMIN: { description: 'Everything, in every tenant (tenantId "*").' },
    TENANT_ADMIN: { description: "Its tenant's rules and API keys; may check its tenant's limits and subscribe to its tenant's events." },
    CHECKER: { description: "May only check its tenant's limits." },
    VIEWER: { description: "Reads its tenant's rules and subscribes to its tenant's events." },
  },
});

@InputType()
export class CreateApiKeyInput {
  @Field(() => String)
  tenantId!: string;

  @Field(() => RoleEnum)
  role!: Role;

  @Field(() => String)
  name!: string;
}

@ObjectType("ApiKey", { simpleResolvers: true })
export class ApiKeyType {
  @Field(() => ID)
  id!: string;

  @Field(() => String)
  tenantId!: string;

  @Field(() => RoleEnum)
  role!: Role;

  @Field(() => String)
  name!: string;

  @Field(() => Date)
  createdAt!: Date;

  @Field(() => Date, { nullable: true })
  revokedAt!: Date | null;
}

@ObjectType("CreatedApiKey", { simpleResolvers: true })
export class CreatedApiKeyType {
  @Field(() => ApiKeyType)
  apiKey!: ApiKeyType;

  @Field(() => String, { description: "The secret to send as Authorization: Bearer <secret>. Shown only now: only its hash is stored." })
  secret!: string;
}
