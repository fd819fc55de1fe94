// Which kernel a palette command acts on: the server's code lenses name the kernels of a document
// (each lens command carries `{ uri, kernel }`, an unresolved lens's data `[key, kernel]`,
// docs/protocol.md); the one at or above the cursor wins.

/** The argument object of every cutune server command. */
export interface KernelTarget {
  readonly uri: string;
  readonly kernel: string;
}

/** A code lens as it comes over the wire (LSP `CodeLens`), reduced to what is read here. */
export interface WireCodeLens {
  readonly range: { readonly start: { readonly line: number } };
  readonly command?: { readonly arguments?: readonly unknown[] } | undefined;
  /** `[key, kernel]` on a lens the server sends without its command (resolved when shown). */
  readonly data?: unknown;
}

export interface KernelAt {
  readonly kernel: string;
  /** The line of its lens (0-based). */
  readonly line: number;
}

export function kernelsFromLenses(lenses: readonly WireCodeLens[]): KernelAt[] {
  const byName = new Map<string, number>();
  for (const lens of lenses) {
    const kernel = lensKernel(lens);
    if (kernel !== undefined && kernel !== "" && !byName.has(kernel)) {
      byName.set(kernel, lens.range.start.line);
    }
  }
  return [...byName].map(([kernel, line]) => ({ kernel, line })).sort((a, b) => a.line - b.line);
}

/** The kernel a lens is for: its command's argument, or its data before it is resolved. */
function lensKernel(lens: WireCodeLens): string | undefined {
  const argument = lens.command?.arguments?.[0];
  if (typeof argument === "object" && argument !== null) {
    const kernel = (argument as Record<string, unknown>)["kernel"];
    return typeof kernel === "string" ? kernel : undefined;
  }
  const kernel = Array.isArray(lens.data) ? (lens.data as unknown[])[1] : undefined;
  return typeof kernel === "string" ? kernel : undefined;
}

/**
 * The kernel the cursor is in: the last one whose lens is at or above the cursor line; the only one when the
 * document has one; undefined when the user must choose.
 */
export function kernelAtLine(kernels: readonly KernelAt[], line: number): string | undefined {
  if (kernels.length === 1) {
    return kernels[0]?.kernel;
  }
  let found: string | undefined;
  for (const k of kernels) {
    if (k.line <= line) {
      found = k.kernel;
    }
  }
  return found;
}
