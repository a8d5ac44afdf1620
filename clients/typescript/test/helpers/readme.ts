// The READMEs' code, as the tests take it: the code blocks of a markdown
// file (each with the `<!-- ci-…: … -->` marker on the line before it, if
// any), and a compiler with the package's settings that fails with the
// diagnostics.
import assert from 'node:assert/strict';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

// build-test/test/helpers -> the package root -> the repository root
export const PKG_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
export const REPO_ROOT = resolve(PKG_ROOT, '..', '..');

export interface CodeBlock {
  lang: string;
  code: string;
  /** The marker's name (`ci-ts`, `ci-ts-worker`, …) when a `<!-- name: … -->` line precedes the block. */
  marker?: string;
}

/** Every fenced block of `markdown` whose language is `lang`, in order. */
export function codeBlocks(markdown: string, lang: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)$/.exec(lines[i]!);
    if (!open) continue;
    const end = lines.indexOf('```', i + 1);
    assert.ok(end > 0, `the block opened on line ${i + 1} is not closed`);
    const marker = /^<!-- ([\w-]+):.*-->$/.exec((lines[i - 1] ?? '').trim())?.[1];
    if (open[1] === lang) blocks.push({ lang, code: lines.slice(i + 1, end).join('\n'), ...(marker && { marker }) });
    i = end;
  }
  return blocks;
}

/** The blocks after a `<!-- marker: … -->` line, which must be `lang` blocks. */
export function markedBlocks(markdown: string, marker: string, lang = 'ts'): string[] {
  const lines = markdown.split('\n');
  const blocks: string[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!new RegExp(`^<!-- ${marker}:.*-->$`).test(lines[i]!.trim())) continue;
    assert.equal(lines[i + 1], '```' + lang, `the marker on line ${i + 1} must precede a ${lang} block`);
    const end = lines.indexOf('```', i + 2);
    assert.ok(end > 0, `the ${lang} block after line ${i + 1} is not closed`);
    blocks.push(lines.slice(i + 2, end).join('\n'));
    i = end;
  }
  return blocks;
}

/**
 * Type-checks and compiles `files` with the package's compiler settings
 * (strict, NodeNext), sources under `rootDir`, output in `outDir`; fails
 * with the compiler's diagnostics. Imports resolve from the files' own
 * directories up, so a file outside the package sees only what its own
 * project installed; `@types/node` is the package's.
 */
export function compileTs(files: string[], dirs: { rootDir: string; outDir: string }, what: string): void {
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    typeRoots: [join(PKG_ROOT, 'node_modules', '@types')],
    strict: true,
    skipLibCheck: true,
    rootDir: dirs.rootDir,
    outDir: dirs.outDir,
  });
  const diagnostics = [...ts.getPreEmitDiagnostics(program), ...program.emit().diagnostics];
  const text = ts.formatDiagnostics(diagnostics, {
    getCanonicalFileName: (f) => f,
    getCurrentDirectory: () => dirs.rootDir,
    getNewLine: () => '\n',
  });
  assert.equal(diagnostics.length, 0, `${what} does not compile:\n${text}`);
}
