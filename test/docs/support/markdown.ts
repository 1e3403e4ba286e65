/**
 * What the documentation tests read in Markdown, without a Markdown library: the documentation files
 * (README.md and docs/**), their fenced code blocks with the line each starts on, their headings'
 * anchors as GitHub makes them, and their relative links. Enough of CommonMark for Herald's own files:
 * fences of three or more backticks (indented inside list items too), inline code spans, inline links
 * and images. Used by the link check (links.unit.spec.ts) and the example runner (examples.int.spec.ts,
 * ADR 0036).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..', '..');

/** README.md and every Markdown file under docs/, as paths relative to the repository, sorted. */
export function documentationFiles(root = ROOT): string[] {
  const files: string[] = ['README.md'];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.md')) files.push(relative(root, path));
    }
  };
  walk(join(root, 'docs'));
  return files.sort();
}

export const read = (file: string, root = ROOT) => readFileSync(join(root, file), 'utf8');

export interface FencedBlock {
  /** 1-based line of the opening fence. */
  line: number;
  /** The info string after the fence (`sh no-run`), trimmed. */
  info: string;
  /** The block's content, the fence's indentation removed. */
  code: string;
}

const FENCE = /^( {0,3}|\s*)(`{3,}|~{3,})(.*)$/;

/** Every fenced code block, in order. An unclosed fence is an error naming its line. */
export function fencedBlocks(markdown: string): FencedBlock[] {
  const lines = markdown.split('\n');
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    // A backtick fence's info string holds no backtick (CommonMark): "```` ```sh ````" is inline code.
    if (!open || (open[2]!.startsWith('`') && open[3]!.includes('`'))) continue;
    const [, indent, fence, info] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const close = FENCE.exec(lines[j]!);
      if (close && close[2]!.startsWith(fence![0]!) && close[2]!.length >= fence!.length && !close[3]!.trim())
        break;
      const text = lines[j]!;
      body.push(text.startsWith(indent!) ? text.slice(indent!.length) : text.trimStart());
    }
    if (j === lines.length) throw new Error(`line ${i + 1}: a code fence that is never closed`);
    blocks.push({ line: i + 1, info: info!.trim(), code: body.join('\n') });
    i = j;
  }
  return blocks;
}

/** The lines outside fenced code blocks (others blanked, so line numbers hold), inline code removed. */
function prose(markdown: string): string[] {
  const lines = markdown.split('\n');
  for (const block of fencedBlocks(markdown)) {
    const count = block.code.split('\n').length + 2;
    for (let k = block.line - 1; k < block.line - 1 + count && k < lines.length; k++) lines[k] = '';
  }
  return lines.map((line) => line.replace(/(`+)(?:(?!\1).)+?\1/g, (code) => ' '.repeat(code.length)));
}

/** GitHub's anchor for a heading's text (github-slugger): lower case, punctuation dropped, spaces → '-'. */
export function slug(heading: string): string {
  const text = heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, '$1') // links and images: their text
    .replace(/`/g, '')
    .replace(/<[^>]+>/g, '');
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replace(/ /g, '-');
}

/** Every anchor a file's headings give (duplicates numbered `-1`, `-2` as GitHub does). */
export function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  const lines = markdown.split('\n');
  const blanked = new Set<number>();
  for (const block of fencedBlocks(markdown)) {
    const count = block.code.split('\n').length + 2;
    for (let k = block.line - 1; k < block.line - 1 + count; k++) blanked.add(k);
  }
  lines.forEach((line, k) => {
    if (blanked.has(k)) return;
    const heading = /^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) return;
    const base = slug(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    result.add(n === 0 ? base : `${base}-${n}`);
  });
  for (const m of markdown.matchAll(/<a\s+(?:name|id)="([^"]+)"/g)) result.add(m[1]!);
  return result;
}

export interface Link {
  line: number;
  target: string;
}

/** Inline links and images outside code (`[text](target)`, `![alt](target "title")`). */
export function links(markdown: string): Link[] {
  const found: Link[] = [];
  prose(markdown).forEach((line, k) => {
    for (const m of line.matchAll(/!?\[(?:[^\]\\]|\\.)*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      found.push({ line: k + 1, target: m[1]! });
    }
  });
  return found;
}
