/**
 * Response conformance: every response a test receives from the API is checked against the OpenAPI
 * document that server serves (`/openapi.json`). The request's operation is found the way the router
 * finds it (a literal segment before a `{parameter}`); its status must be documented for the operation,
 * the response's media type for that status, and the body must validate against that schema (Ajv, JSON
 * Schema 2020-12, the document's own `$ref`s). A request no operation documents (an unknown route, a
 * method the path does not declare) has nothing to conform to. A mismatch throws, so the test that
 * received the response fails, naming the operation, the status and what differs.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';

// ajv-formats is CommonJS: its default export is the plugin under NodeNext.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

interface MediaType {
  schema?: unknown;
}
interface ResponseObject {
  content?: Record<string, MediaType>;
}
interface Operation {
  responses: Record<string, ResponseObject>;
}
export interface OpenApiDocument {
  paths: Record<string, Record<string, Operation>>;
  components?: unknown;
}

/** What a test saw: the request line and the response as received. */
export interface SeenResponse {
  method: string;
  /** The request target, query string allowed. */
  path: string;
  status: number;
  contentType: string | null;
  /** The body as text (empty when there was none). */
  text: string;
}

const DOCUMENT_ID = 'urn:herald:openapi';
const pointerPart = (part: string) => part.replaceAll('~', '~0').replaceAll('/', '~1');
const isJson = (mediaType: string) => mediaType === 'application/json' || mediaType.endsWith('+json');

interface Template {
  path: string;
  pattern: RegExp;
  /** Fewer parameters first: `/v1/campaigns/preview` wins over `/v1/campaigns/{id}`. */
  parameters: number;
}

export class ResponseConformance {
  private readonly ajv: Ajv2020;
  private readonly templates: Template[];
  private readonly validators = new Map<string, ValidateFunction>();

  constructor(private readonly document: OpenApiDocument) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, logger: false, validateSchema: false });
    addFormats(this.ajv);
    this.ajv.addSchema(document as object, DOCUMENT_ID, undefined, false);
    this.templates = Object.keys(document.paths)
      .map((path) => {
        const names = path.match(/\{[^}]+\}/g) ?? [];
        const source = path
          .split(/\{[^}]+\}/)
          .map((literal) => literal.replace(/[.*+?^$()|[\]\\]/g, '\\$&'))
          .join('([^/]+)');
        return { path, pattern: new RegExp(`^${source}$`), parameters: names.length };
      })
      .sort((a, b) => a.parameters - b.parameters);
  }

  /** The documented path and method of a request, or undefined when no operation documents it. */
  operationOf(method: string, target: string): { path: string; method: string } | undefined {
    const pathname = target.split('?')[0]!;
    const verb = method.toLowerCase() === 'head' ? 'get' : method.toLowerCase();
    for (const template of this.templates) {
      if (template.pattern.test(pathname) && this.document.paths[template.path]?.[verb]) {
        return { path: template.path, method: verb };
      }
    }
    return undefined;
  }

  /** Every way `seen` differs from the document (empty when it conforms). */
  violations(seen: SeenResponse): string[] {
    const found = this.operationOf(seen.method, seen.path);
    if (!found) return [];
    const where = `${seen.method} ${found.path} → ${seen.status}`;
    const operation = this.document.paths[found.path]![found.method]!;
    const statusKey = [String(seen.status), `${String(seen.status)[0]}XX`, 'default'].find(
      (key) => operation.responses[key] !== undefined,
    );
    if (statusKey === undefined) {
      return [
        `${where}: status ${seen.status} is not documented (documented: ${Object.keys(operation.responses).join(', ')})`,
      ];
    }
    const response = operation.responses[statusKey]!;
    const hasBody = seen.text.length > 0 && seen.method.toUpperCase() !== 'HEAD';
    if (!response.content || Object.keys(response.content).length === 0) {
      return hasBody ? [`${where}: documented without a body, but one came (${seen.contentType})`] : [];
    }
    if (!hasBody) return [];
    const mediaType = (seen.contentType ?? '').split(';')[0]!.trim().toLowerCase();
    const media = response.content[mediaType];
    if (!media) {
      return [
        `${where}: content type ${mediaType || '(none)'} is not documented (documented: ${Object.keys(response.content).join(', ')})`,
      ];
    }
    if (media.schema === undefined) return [];
    let value: unknown = seen.text;
    if (isJson(mediaType)) {
      try {
        value = JSON.parse(seen.text);
      } catch {
        return [`${where}: ${mediaType} body is not JSON: ${seen.text.slice(0, 200)}`];
      }
    }
    const pointer = [
      'paths',
      found.path,
      found.method,
      'responses',
      statusKey,
      'content',
      mediaType,
      'schema',
    ]
      .map(pointerPart)
      .join('/');
    const validate = this.validator(pointer);
    if (validate(value)) return [];
    return (validate.errors ?? []).map(
      (error) =>
        `${where} (${mediaType}): ${error.instancePath || '(root)'} ${error.message ?? error.keyword} ${JSON.stringify(error.params)}`,
    );
  }

  /** Throws, naming every difference, when `seen` does not conform. */
  check(seen: SeenResponse): void {
    const found = this.violations(seen);
    if (found.length > 0) {
      throw new Error(
        `the response does not conform to /openapi.json:\n  ${found.join('\n  ')}\nbody: ${seen.text.slice(0, 500)}`,
      );
    }
  }

  private validator(pointer: string): ValidateFunction {
    let validate = this.validators.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${DOCUMENT_ID}#/${pointer}` });
      this.validators.set(pointer, validate);
    }
    return validate;
  }
}

const byServer = new Map<string, Promise<ResponseConformance>>();

/** The conformance check of the API at `url`, from the document it serves (fetched once per server). */
export function conformanceOf(url: string): Promise<ResponseConformance> {
  let found = byServer.get(url);
  if (!found) {
    found = (async () => {
      const response = await fetch(`${url}/openapi.json`);
      if (!response.ok) throw new Error(`GET ${url}/openapi.json answered ${response.status}`);
      return new ResponseConformance((await response.json()) as OpenApiDocument);
    })();
    found.catch(() => byServer.delete(url));
    byServer.set(url, found);
  }
  return found;
}

/**
 * The in-process server at `url` serves `document` (its own `app.swagger()`): no fetch, and no stale
 * document of an earlier server on the same port.
 */
export function useDocument(url: string, document: unknown): void {
  byServer.set(url, Promise.resolve(new ResponseConformance(document as OpenApiDocument)));
}

/** The server at `url` closed (its port may serve another next). */
export function forgetDocument(url: string): void {
  byServer.delete(url);
}

/** Checks one response against the document of the API at `url` (throws when it does not conform). */
export async function checkConformance(url: string, seen: SeenResponse): Promise<void> {
  (await conformanceOf(url)).check(seen);
}
