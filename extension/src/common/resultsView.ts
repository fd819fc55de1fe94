// The results view: the server's `cutune.resultsView` data drawn as a page of SVG pictures — per-size bars against the
// speed-of-light floor, the trial history, and the agent's steps. No script runs in it: the page is static HTML.

/** One problem size: times of the original and of the best configuration, and the floor. */
export interface SizeRow {
  readonly label: string;
  readonly originalUs: number;
  readonly bestUs: number;
  readonly floorUs: number | null;
  readonly pctOfFloor: number | null;
  readonly originalPctOfFloor: number | null;
}

/** One finished trial: time relative to the original (lower is better), or why it failed. */
export interface TrialRow {
  readonly number: number;
  readonly objective: number | null;
  readonly failure: string | null;
}

/** One agent step (agent/record.py StepRecord). */
export interface StepRow {
  readonly step: number;
  readonly source: string;
  readonly variant: string;
  readonly change: string;
  readonly outcome: string;
  readonly reason: string;
  readonly speedup: number | null;
}

export interface ResultsViewData {
  readonly kernel: string;
  readonly message: string;
  readonly device: string;
  readonly replayed: string;
  readonly speedup: number | null;
  readonly sizes: readonly SizeRow[];
  readonly trials: readonly TrialRow[];
  readonly steps: readonly StepRow[];
  readonly agent: { readonly stop: string; readonly message: string } | null;
}

const WIDTH = 560;
const LABEL = 190;
const BAR_H = 12;

/** The server's reply as typed data; undefined when it is not a results view reply. */
export function parseResultsView(raw: unknown): ResultsViewData | undefined {
  if (!isRecord(raw) || typeof raw["kernel"] !== "string") {
    return undefined;
  }
  const agent = isRecord(raw["agent"]) ? raw["agent"] : undefined;
  return {
    kernel: raw["kernel"],
    message: str(raw["message"]),
    device: str(raw["device"]),
    replayed: str(raw["replayed"]),
    speedup: num(raw["speedup"]),
    sizes: list(raw["sizes"]).map((s) => ({
      label: str(s["label"]),
      originalUs: num(s["originalUs"]) ?? 0,
      bestUs: num(s["bestUs"]) ?? 0,
      floorUs: num(s["floorUs"]),
      pctOfFloor: num(s["pctOfFloor"]),
      originalPctOfFloor: num(s["originalPctOfFloor"]),
    })),
    trials: list(raw["trials"]).map((t) => ({
      number: num(t["number"]) ?? 0,
      objective: num(t["objective"]),
      failure: typeof t["failure"] === "string" ? t["failure"] : null,
    })),
    steps: list(raw["steps"]).map((s) => ({
      step: num(s["step"]) ?? 0,
      source: str(s["source"]),
      variant: str(s["variant"]),
      change: str(s["change"]),
      outcome: str(s["outcome"]),
      reason: str(s["reason"]),
      speedup: num(s["speedup"]),
    })),
    agent: agent === undefined ? null : { stop: str(agent["stop"]), message: str(agent["message"]) },
  };
}

/** The page: a strict content security policy (no scripts), then the three pictures. */
export function resultsHtml(view: ResultsViewData, cspSource: string): string {
  const where = view.replayed !== "" ? view.replayed : view.device;
  const headline =
    view.speedup === null ? esc(view.message || "no result yet") : `${view.speedup.toFixed(2)}× over the original · ${esc(where)}`;
  return `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src ${cspSource} 'unsafe-inline'; img-src ${cspSource} data:;">
<title>cutune results: ${esc(view.kernel)}</title>
<style>
body { font-family: var(--vscode-font-family); color: var(--vscode-foreground); padding: 0 16px; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
.muted { opacity: .75; } svg text { fill: var(--vscode-foreground); font-size: 11px; }
.track { fill: var(--vscode-editorWidget-background, #8883); }
.bar.original { fill: var(--vscode-charts-gray, #888); } .bar.best { fill: var(--vscode-charts-green, #3a3); }
.floor { stroke: var(--vscode-charts-red, #d33); stroke-width: 1.5; }
.dot { fill: var(--vscode-charts-blue, #38f); } .failed { fill: var(--vscode-charts-red, #d33); }
.front { stroke: var(--vscode-charts-green, #3a3); fill: none; stroke-width: 1.5; }
.kept { fill: var(--vscode-charts-green, #3a3); } .rejected { fill: var(--vscode-charts-red, #d33); }
.no_gain, .compile_only { fill: var(--vscode-charts-yellow, #cb3); }
</style></head>
<body>
<h1>${esc(view.kernel)}</h1>
<p class="muted">${headline}</p>
<h2>Per size against the speed-of-light floor</h2>
${sizesSvg(view.sizes)}
<h2>Trial history</h2>
${trialsSvg(view.trials)}
<h2>Agent steps</h2>
${stepsSvg(view.steps, view.agent)}
</body></html>`;
}

/** Two bars per size (original, best) as % of the floor: 100% is the physical limit, drawn as a line. */
export function sizesSvg(sizes: readonly SizeRow[]): string {
  if (sizes.length === 0) {
    return `<p class="muted">No measured sizes yet: autotune the kernel.</p>`;
  }
  const rowH = 2 * BAR_H + 14;
  const scale = WIDTH - LABEL - 60;
  const rows = sizes.map((s, i) => {
    const y = 8 + i * rowH;
    const original = clampPct(s.originalPctOfFloor);
    const best = clampPct(s.pctOfFloor);
    const pct = s.pctOfFloor === null ? "floor unknown" : `${s.pctOfFloor.toFixed(0)}% of floor`;
    return `<g class="size"><text x="0" y="${y + BAR_H + 2}">${esc(s.label)}</text>
<rect class="track" x="${LABEL}" y="${y}" width="${scale}" height="${2 * BAR_H + 2}"/>
<rect class="bar original" x="${LABEL}" y="${y}" width="${(original * scale) / 100}" height="${BAR_H}"><title>original ${s.originalUs.toFixed(1)} µs</title></rect>
<rect class="bar best" x="${LABEL}" y="${y + BAR_H + 2}" width="${(best * scale) / 100}" height="${BAR_H}"><title>best ${s.bestUs.toFixed(1)} µs</title></rect>
<text x="${LABEL + scale + 6}" y="${y + 2 * BAR_H}">${pct}</text></g>`;
  });
  const height = 8 + sizes.length * rowH + 16;
  const floorX = LABEL + scale;
  return `<svg class="sizes" width="${WIDTH + 40}" height="${height}" role="img" aria-label="time per size as % of the floor">
${rows.join("\n")}
<line class="floor" x1="${floorX}" y1="4" x2="${floorX}" y2="${height - 14}"/>
<text x="${floorX - 40}" y="${height - 2}">floor (100%)</text>
<text x="${LABEL}" y="${height - 2}">grey: original · green: best</text></svg>`;
}

/** Each trial's time relative to the original (failed ones in red along the top), and the best so far. */
export function trialsSvg(trials: readonly TrialRow[]): string {
  if (trials.length === 0) {
    return `<p class="muted">No trials recorded.</p>`;
  }
  const h = 160;
  const ok = trials.filter((t) => t.objective !== null);
  const top = Math.max(1.1, ...ok.map((t) => t.objective ?? 0));
  const last = Math.max(1, ...trials.map((t) => t.number));
  const x = (n: number): number => 30 + (n / last) * (WIDTH - 40);
  const y = (v: number): number => h - 20 - (v / top) * (h - 40);
  const dots = trials.map((t) =>
    t.objective === null
      ? `<rect class="failed" x="${x(t.number) - 2}" y="6" width="4" height="4"><title>#${t.number}: ${esc(t.failure ?? "failed")}</title></rect>`
      : `<circle class="dot" cx="${x(t.number)}" cy="${y(t.objective)}" r="2.5"><title>#${t.number}: ${t.objective.toFixed(3)}</title></circle>`,
  );
  let best = Infinity;
  const front: string[] = [];
  for (const t of [...ok].sort((a, b) => a.number - b.number)) {
    best = Math.min(best, t.objective ?? Infinity);
    front.push(`${x(t.number).toFixed(1)},${y(best).toFixed(1)}`);
  }
  return `<svg class="trials" width="${WIDTH}" height="${h}" role="img" aria-label="trial history">
<line class="floor" x1="30" y1="${y(1)}" x2="${WIDTH - 10}" y2="${y(1)}"/><text x="0" y="${y(1) + 4}">1.0</text>
${dots.join("\n")}
<polyline class="front" points="${front.join(" ")}"/>
<text x="30" y="${h - 4}">trial → (time / original time; red line: the original, green: best so far)</text></svg>`;
}

/** One row per step: outcome, variant, change, speedup bar and the reason; then how the agent stopped. */
export function stepsSvg(steps: readonly StepRow[], agent: ResultsViewData["agent"]): string {
  const stopped = agent === null ? "" : `<p>Stopped: ${esc(agent.stop)} — ${esc(agent.message)}</p>`;
  if (steps.length === 0) {
    return `${stopped}<p class="muted">The agent took no step for this kernel.</p>`;
  }
  const rowH = 34;
  const rows = steps.map((s, i) => {
    const y = 6 + i * rowH;
    const width = s.speedup === null ? 0 : Math.min(120, (s.speedup - 1) * 120);
    return `<g class="step"><rect class="${esc(s.outcome)}" x="0" y="${y}" width="10" height="24"/>
<text x="16" y="${y + 10}">${s.step} · ${esc(s.source)} · ${esc(s.variant)} · ${esc(s.outcome)}${s.speedup === null ? "" : ` · ${s.speedup.toFixed(2)}×`}</text>
<text x="16" y="${y + 23}" class="muted">${esc(truncate(s.reason || s.change, 90))}</text>
<rect class="bar best" x="${WIDTH - 130}" y="${y + 2}" width="${Math.max(0, width)}" height="8"/></g>`;
  });
  return `${stopped}<svg class="steps" width="${WIDTH}" height="${6 + steps.length * rowH}" role="img" aria-label="agent steps">
${rows.join("\n")}</svg>`;
}

function clampPct(value: number | null): number {
  return value === null ? 0 : Math.max(0, Math.min(100, value));
}

function truncate(text: string, n: number): string {
  return text.length <= n ? text : `${text.slice(0, n - 1)}…`;
}

export function esc(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function list(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.filter(isRecord) : [];
}

function str(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function num(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}
