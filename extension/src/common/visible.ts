// The lines each editor shows, told to the server (`cutune/visibleRanges`, docs/protocol.md): a document of many
// kernels gets lenses only near them (an editor decoding every lens of a 200,000-line file took ~100 ms a list).

export const VISIBLE_RANGES_NOTIFICATION = "cutune/visibleRanges";

/** One range of lines an editor shows (0-based, inclusive). */
export interface ShownLines {
  readonly first: number;
  readonly last: number;
}

interface WirePosition {
  readonly line: number;
  readonly character: number;
}

export interface VisibleRangesParams {
  readonly textDocument: { readonly uri: string };
  readonly ranges: readonly { readonly start: WirePosition; readonly end: WirePosition }[];
}

export function visibleRangesParams(uri: string, shown: readonly ShownLines[]): VisibleRangesParams {
  return {
    textDocument: { uri },
    ranges: shown.map((s) => ({ start: { line: s.first, character: 0 }, end: { line: s.last, character: 0 } })),
  };
}

/** Sends each document's latest shown lines at most once per `delayMs` (scrolling fires an event per frame). */
export class ShownLinesReporter {
  private readonly pending = new Map<string, readonly ShownLines[]>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly send: (params: VisibleRangesParams) => void,
    private readonly delayMs = 50,
  ) {}

  report(uri: string, shown: readonly ShownLines[]): void {
    this.pending.set(uri, shown);
    this.timer ??= setTimeout(() => {
      this.flush();
    }, this.delayMs);
  }

  /** Sends what is pending now. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const pending = [...this.pending];
    this.pending.clear();
    for (const [uri, shown] of pending) {
      this.send(visibleRangesParams(uri, shown));
    }
  }

  dispose(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.pending.clear();
  }
}
