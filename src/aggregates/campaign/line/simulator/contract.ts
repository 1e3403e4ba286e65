/**
 * The LINE simulator's contract check: every request is validated against the operation's schema in
 * LINE's own OpenAPI documents (unmodified copies in test/contract/line-openapi/), addressed by JSON
 * pointer into the document, with ajv. What OpenAPI 3.0 adds to JSON Schema is handled here instead of
 * editing the documents: `discriminator` (a parent schema naming its subtypes, each of which `allOf`s the
 * parent back) dispatches to the mapped schema and refuses an unknown value, a `format` that is a regex
 * (`"^[0-9]{8}$"`) is that regex, and annotations (`example`, `externalDocs`, `x-enum-*`) are known.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  Ajv,
  type AnySchemaObject,
  type ErrorObject,
  type FuncKeywordDefinition,
  type SchemaObjCxt,
  type ValidateFunction,
} from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { packageRoot } from '../../../../package-root.js';

/** One problem, as LINE reports it in a 400 body's `details`. */
export interface LineErrorDetail {
  message: string;
  property: string;
}

export const MESSAGING_API_DOCUMENT = 'messaging-api.yml';
export const CHANNEL_ACCESS_TOKEN_DOCUMENT = 'channel-access-token.yml';

/**
 * The copies' folder: `dist/contracts/line-openapi/` in the package (the build copies it there), else
 * test/contract/line-openapi/ of the repository (running from source).
 */
export function defaultOpenApiDir(): string {
  const shipped = join(packageRoot(), 'dist', 'contracts', 'line-openapi');
  if (existsSync(join(shipped, MESSAGING_API_DOCUMENT))) return shipped;
  return join(packageRoot(), 'test', 'contract', 'line-openapi');
}

type OpenApiDocument = { paths: Record<string, Record<string, OpenApiOperation>> };
interface OpenApiOperation {
  operationId: string;
  parameters?: { name: string; in: string; required?: boolean; schema: unknown }[];
  requestBody?: { required?: boolean; content: Record<string, { schema: unknown }> };
}

/** What the simulator checks of one operation: its headers and its body, each against the document. */
export interface OperationContract {
  readonly operationId: string;
  /** The body's declared media type (`application/json`, `application/x-www-form-urlencoded`), if any. */
  readonly mediaType: string | null;
  /** Validates headers (lower-cased names) and the parsed body; empty when both conform. */
  check(request: { headers: Record<string, string | undefined>; body: unknown }): LineErrorDetail[];
}

/** `/messages/0/text` → `messages[0].text` (LINE's `property` notation). */
function propertyOf(instancePath: string, extra?: string): string {
  const parts = instancePath.split('/').slice(1);
  if (extra !== undefined) parts.push(extra);
  let out = '';
  for (const raw of parts) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    if (/^\d+$/.test(part)) out += `[${part}]`;
    else out += out === '' ? part : `.${part}`;
  }
  return out;
}

function detailOf(error: ErrorObject, prefix: string): LineErrorDetail {
  const missing = error.keyword === 'required' ? String(error.params.missingProperty) : undefined;
  const property = propertyOf(error.instancePath, missing);
  return {
    message: missing !== undefined ? 'must be specified' : (error.message ?? error.keyword),
    property: prefix === '' ? property : property === '' ? prefix : `${prefix}.${property}`,
  };
}

/**
 * Ajv's own `discriminator` needs `oneOf` beside it; LINE's documents use the other OpenAPI style (a
 * parent with a `mapping` whose targets `allOf` the parent). This keyword validates the data against
 * the mapped schema as well; re-entering the same parent for the same data (from the child's `allOf`)
 * is a no-op, which breaks the cycle without weakening either schema.
 */
type DataValidateFunction = ReturnType<NonNullable<FuncKeywordDefinition['compile']>>;

function discriminatorKeyword(ajv: Ajv): FuncKeywordDefinition {
  const inFlight = new WeakMap<object, Set<unknown>>();
  return {
    keyword: 'discriminator',
    schemaType: 'object',
    errors: true,
    compile(
      schema: { propertyName: string; mapping?: Record<string, string> },
      _parent: AnySchemaObject,
      it: SchemaObjCxt,
    ) {
      const baseId = it.baseId;
      const targets = new Map<string, ValidateFunction>();
      const validate: DataValidateFunction = (data: unknown, cxt?: { instancePath: string }) => {
        const path = cxt?.instancePath ?? '';
        validate.errors = [];
        if (typeof data !== 'object' || data === null || Array.isArray(data)) return true;
        const value = (data as Record<string, unknown>)[schema.propertyName];
        const mapping = schema.mapping ?? {};
        if (typeof value !== 'string' || !Object.hasOwn(mapping, value)) {
          validate.errors = [
            {
              instancePath: `${path}/${schema.propertyName}`,
              keyword: 'discriminator',
              params: { propertyName: schema.propertyName, allowed: Object.keys(mapping) },
              message: `must be one of: ${Object.keys(mapping).join(', ')}`,
            },
          ];
          return false;
        }
        const seen = inFlight.get(data);
        if (seen?.has(schema)) return true;
        let target = targets.get(value);
        if (target === undefined) {
          const ref = mapping[value]!;
          target = ajv.getSchema(ref.startsWith('#') ? `${baseId.replace(/#.*$/, '')}${ref}` : ref);
          if (target === undefined)
            throw new Error(`discriminator mapping ${value} → ${ref} does not resolve`);
          targets.set(value, target);
        }
        const set = seen ?? new Set<unknown>();
        set.add(schema);
        inFlight.set(data, set);
        try {
          if (target(data)) return true;
          validate.errors = (target.errors ?? []).map((error) => ({
            ...error,
            instancePath: `${path}${error.instancePath}`,
          }));
          return false;
        } finally {
          set.delete(schema);
          if (set.size === 0) inFlight.delete(data);
        }
      };
      return validate;
    },
  };
}

/** An ajv instance that knows OpenAPI 3.0's additions, with LINE's documents loaded under their file names. */
export class LineOpenApiContract {
  private readonly ajv: Ajv;
  private readonly documents = new Map<string, OpenApiDocument>();
  private readonly operations = new Map<string, OperationContract>();

  constructor(readonly dir: string = defaultOpenApiDir()) {
    const ajv = new Ajv({ allErrors: true, strict: true, strictTypes: false, strictRequired: false });
    // ajv-formats is CommonJS; under NodeNext its default import is the module object.
    const addFormats =
      (addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule;
    (addFormats as unknown as (ajv: Ajv) => void)(ajv);
    // Annotations: OpenAPI's schema extras, and the document's own fields (ajv compiles the document's
    // root as the resource the pointers resolve in; it constrains nothing).
    ajv.addVocabulary(['example', 'externalDocs', 'x-enum-varnames', 'x-enum-descriptions']);
    ajv.addVocabulary(['openapi', 'info', 'servers', 'security', 'tags', 'paths', 'components']);
    ajv.addKeyword(discriminatorKeyword(ajv));
    this.ajv = ajv;
    for (const name of [MESSAGING_API_DOCUMENT, CHANNEL_ACCESS_TOKEN_DOCUMENT]) {
      const file = join(dir, name);
      if (!existsSync(file)) throw new Error(`LINE OpenAPI document not found: ${file}`);
      const document = parseYaml(readFileSync(file, 'utf8')) as OpenApiDocument;
      this.addRegexFormats(document);
      // The whole document is one schema resource: refs (`#/components/schemas/…`) resolve within it.
      ajv.addSchema(document as AnySchemaObject, name);
      this.documents.set(name, document);
    }
  }

  /** OpenAPI leaves `format` open; LINE uses a regex as a format (`"^[0-9]{8}$"`): it means that regex. */
  private addRegexFormats(document: unknown) {
    const visit = (node: unknown) => {
      if (Array.isArray(node)) for (const item of node) visit(item);
      else if (typeof node === 'object' && node !== null) {
        for (const [key, value] of Object.entries(node)) {
          if (key === 'format' && typeof value === 'string' && value.startsWith('^')) {
            if (!this.ajv.formats[value]) this.ajv.addFormat(value, new RegExp(value));
          } else visit(value);
        }
      }
    };
    visit(document);
  }

  /** The contract of `method path` in one of the documents (compiled once). */
  operation(document: string, method: string, path: string): OperationContract {
    const key = `${document} ${method} ${path}`;
    const cached = this.operations.get(key);
    if (cached) return cached;
    const operation = this.documents.get(document)?.paths[path]?.[method];
    if (!operation) throw new Error(`no operation ${method.toUpperCase()} ${path} in ${document}`);
    const pointer = `${document}#/paths/${path.replace(/~/g, '~0').replace(/\//g, '~1')}/${method}`;
    const headers = (operation.parameters ?? [])
      .map((parameter, index) => ({ parameter, index }))
      .filter(({ parameter }) => parameter.in === 'header')
      .map(({ parameter, index }) => ({
        name: parameter.name,
        lower: parameter.name.toLowerCase(),
        required: parameter.required === true,
        validate: this.ajv.compile({ $ref: `${pointer}/parameters/${index}/schema` }),
      }));
    const content = operation.requestBody?.content ?? {};
    const mediaType = Object.keys(content)[0] ?? null;
    const body =
      mediaType === null
        ? null
        : this.ajv.compile({
            $ref: `${pointer}/requestBody/content/${mediaType.replace(/\//g, '~1')}/schema`,
          });
    const bodyRequired = operation.requestBody?.required === true;
    const contract: OperationContract = {
      operationId: operation.operationId,
      mediaType,
      check({ headers: given, body: data }) {
        const details: LineErrorDetail[] = [];
        for (const header of headers) {
          const value = given[header.lower];
          if (value === undefined) {
            if (header.required) details.push({ message: 'must be specified', property: header.name });
          } else if (!header.validate(value)) {
            for (const error of header.validate.errors ?? []) details.push(detailOf(error, header.name));
          }
        }
        if (body) {
          if (data === undefined) {
            if (bodyRequired) details.push({ message: 'The request body is required', property: '' });
          } else if (!body(data)) {
            for (const error of body.errors ?? []) details.push(detailOf(error, ''));
          }
        }
        // A subtype reached both directly and through its parent's discriminator reports twice.
        const seen = new Set<string>();
        return details.filter((detail) => {
          const key = `${detail.property}\u0000${detail.message}`;
          if (seen.has(key)) return false;
          seen.add(key);
          return true;
        });
      },
    };
    this.operations.set(key, contract);
    return contract;
  }
}
