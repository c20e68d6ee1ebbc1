import { Field, InputType, ObjectType } from "type-graphql";

@InputType({ description: 'One business attribute of a check, e.g. { key: "plan", value: "free" } (see docs/rules.md#attributes).' })
export class AttributeInput {
  @Field(() => String, { description: 'Letters, digits, "_", "-" and "." (1 to 64); each key once per check.' })
  key!: string;

  @Field(() => String, { description: "1 to 256 printable characters." })
  value!: string;
}

@InputType({ description: "A rule applies only to checks whose attribute `key` is one of `values`." })
export class AttributeConditionInput {
  @Field(() => String)
  key!: string;

  @Field(() => [String])
  values!: string[];
}

@ObjectType("AttributeCondition", { simpleResolvers: true, description: "A rule applies only to checks whose attribute `key` is one of `values`; a check without the attribute is not matched." })
export class AttributeConditionType {
  @Field(() => String)
  key!: string;

  @Field(() => [String])
  values!: string[];
}
