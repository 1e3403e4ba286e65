/**
 * Message templates and their `{{tag}}` values (seed 003, steps 5, 6 and 8). Pure.
 *
 * - Tags are read exactly: `{{name}}` with a name of letters, digits and `_` (starting with a letter or
 *   `_`), no spaces inside the braces; any other brace in a template is malformed.
 * - GENERIC allows no tags; PERSONALIZED requires at least one.
 * - A recipient supplies exactly the template's tags: an extra or missing one is rejected, and so is a
 *   value longer than 100 characters, one containing template braces or control characters, and,
 *   when lang=en, one that is not GSM-7 (the template too must be GSM-7 then).
 * Every problem is a `RuleIssue` naming the field and the rule, so the API can answer with both.
 */
import { isGsm7 } from './encoding.js';

export const TEMPLATE_TYPES = ['GENERIC', 'PERSONALIZED'] as const;
export type TemplateType = (typeof TEMPLATE_TYPES)[number];
export const SMS_LANGS = ['bn', 'en'] as const;
export type SmsLang = (typeof SMS_LANGS)[number];

/** Seed 003: a tag value may be at most 100 characters. */
export const MAX_TAG_VALUE_LENGTH = 100;

/** One broken rule: the field (a path such as `recipients[3].tags.name`), the rule's name, and why. */
export interface RuleIssue {
  readonly field: string;
  readonly rule: string;
  readonly message: string;
}

const TAG = /\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}/g;
// Control characters other than line feed and carriage return (allowed in SMS text).
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to find control characters
const CONTROL = /[\u0000-\u0009\u000b\u000c\u000e-\u001f\u007f-\u009f]/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the point is to find control characters
const CONTROL_IN_VALUE = /[\u0000-\u001f\u007f-\u009f]/;

/** The distinct tag names of a template, in order of first use. */
export function templateTags(template: string): string[] {
  return [...new Set([...template.matchAll(TAG)].map((m) => m[1]!))];
}

/** Checks a template against its type and language. */
export function templateIssues(template: string, type: TemplateType, lang: SmsLang): RuleIssue[] {
  const issues: RuleIssue[] = [];
  const field = 'template';
  if (template.trim().length === 0) {
    return [{ field, rule: 'template.empty', message: 'the template must not be empty' }];
  }
  const rest = template.replace(TAG, '');
  if (rest.includes('{') || rest.includes('}')) {
    issues.push({
      field,
      rule: 'template.malformed-tag',
      message: 'braces may only appear in exact {{tag}} names (letters, digits, _; no spaces)',
    });
  }
  if (CONTROL.test(template)) {
    issues.push({
      field,
      rule: 'template.control-characters',
      message: 'the template contains control characters',
    });
  }
  const tags = templateTags(template);
  if (type === 'GENERIC' && tags.length > 0) {
    issues.push({
      field,
      rule: 'template.tags-not-allowed',
      message: `a GENERIC template allows no tags (found ${tags.map((t) => `{{${t}}}`).join(', ')})`,
    });
  }
  if (type === 'PERSONALIZED' && tags.length === 0) {
    issues.push({
      field,
      rule: 'template.tags-required',
      message: 'a PERSONALIZED template needs at least one {{tag}}',
    });
  }
  if (lang === 'en' && !isGsm7(template)) {
    issues.push({
      field,
      rule: 'template.not-gsm7',
      message: 'with lang=en the template must be GSM-7 text',
    });
  }
  return issues;
}

/** Checks one tag value (a CSV cell or an inline recipient's value). */
export function tagValueIssues(field: string, value: string, lang: SmsLang): RuleIssue[] {
  const issues: RuleIssue[] = [];
  if (value.length > MAX_TAG_VALUE_LENGTH) {
    issues.push({
      field,
      rule: 'tags.too-long',
      message: `a tag value may have at most ${MAX_TAG_VALUE_LENGTH} characters`,
    });
  }
  if (value.includes('{') || value.includes('}')) {
    issues.push({ field, rule: 'tags.braces', message: 'a tag value may not contain template braces' });
  }
  if (CONTROL_IN_VALUE.test(value)) {
    issues.push({
      field,
      rule: 'tags.control-characters',
      message: 'a tag value may not contain control characters',
    });
  }
  if (lang === 'en' && !isGsm7(value)) {
    issues.push({ field, rule: 'tags.not-gsm7', message: 'with lang=en a tag value must be GSM-7 text' });
  }
  return issues;
}

/**
 * Checks a recipient's tag values against the template's tags: exactly those tags, each value valid.
 * `field` is the recipient's path (e.g. `recipients[3]`).
 */
export function recipientTagIssues(
  field: string,
  tags: readonly string[],
  values: Readonly<Record<string, string>> | null | undefined,
  type: TemplateType,
  lang: SmsLang,
): RuleIssue[] {
  const given = values ?? {};
  const names = Object.keys(given);
  if (type === 'GENERIC') {
    return names.length === 0
      ? []
      : [
          {
            field: `${field}.tags`,
            rule: 'tags.not-allowed',
            message: 'a GENERIC campaign takes no tag values',
          },
        ];
  }
  const issues: RuleIssue[] = [];
  const wanted = new Set(tags);
  for (const name of names) {
    if (!wanted.has(name)) {
      issues.push({
        field: `${field}.tags.${name}`,
        rule: 'tags.extra',
        message: `the template has no {{${name}}}`,
      });
    }
  }
  for (const tag of tags) {
    const value = given[tag];
    if (value === undefined || value.trim() === '') {
      issues.push({
        field: `${field}.tags.${tag}`,
        rule: 'tags.missing',
        message: `a value for {{${tag}}} is required`,
      });
    } else {
      issues.push(...tagValueIssues(`${field}.tags.${tag}`, value, lang));
    }
  }
  return issues;
}

/** Replaces every `{{tag}}` with its value (values were checked by recipientTagIssues). */
export function render(
  template: string,
  values: Readonly<Record<string, string>> | null | undefined,
): string {
  if (!values) return template;
  return template.replace(TAG, (whole, name: string) => values[name] ?? whole);
}
