// What the status-bar item says: the server's state and, while tuning, the running job.
// Pure: `statusView` gives the text, tooltip and colour; vscodeapi.ts puts them on the item.

export type ServerState =
  | { readonly kind: "starting" }
  | { readonly kind: "running"; readonly interpreter: string }
  | { readonly kind: "stopped" }
  | { readonly kind: "unavailable"; readonly label: string; readonly reason: string }
  | { readonly kind: "crashed"; readonly reason: string };

export const JOB_STATES = ["queued", "running", "done", "failed", "cancelled"] as const;
export type JobState = (typeof JOB_STATES)[number];

/** `cutune/jobStatus` (docs/protocol.md). */
export interface JobStatus {
  readonly uri: string;
  readonly kernel: string;
  readonly state: JobState;
  readonly done: number;
  readonly budget: number;
  /** Best speedup so far (original time / best time). */
  readonly best: number | null;
  readonly message: string;
}

export const JOB_STATUS_NOTIFICATION = "cutune/jobStatus";

/** Parses a `cutune/jobStatus` payload; undefined when it does not match the protocol. */
export function parseJobStatus(params: unknown): JobStatus | undefined {
  if (typeof params !== "object" || params === null) {
    return undefined;
  }
  const p = params as Record<string, unknown>;
  const state = JOB_STATES.find((s) => s === p["state"]);
  if (typeof p["uri"] !== "string" || typeof p["kernel"] !== "string" || state === undefined) {
    return undefined;
  }
  return {
    uri: p["uri"],
    kernel: p["kernel"],
    state,
    done: typeof p["done"] === "number" ? p["done"] : 0,
    budget: typeof p["budget"] === "number" ? p["budget"] : 0,
    best: typeof p["best"] === "number" ? p["best"] : null,
    message: typeof p["message"] === "string" ? p["message"] : "",
  };
}

export function isFinished(job: JobStatus): boolean {
  return job.state === "done" || job.state === "failed" || job.state === "cancelled";
}

/** The jobs that are queued or running, one per kernel, in the order they started. */
export class JobBoard {
  private readonly jobs = new Map<string, JobStatus>();

  update(job: JobStatus): void {
    const key = `${job.uri}#${job.kernel}`;
    if (isFinished(job)) {
      this.jobs.delete(key);
    } else {
      this.jobs.set(key, job);
    }
  }

  active(): JobStatus[] {
    return [...this.jobs.values()];
  }

  clear(): void {
    this.jobs.clear();
  }
}

export interface StatusView {
  readonly text: string;
  readonly tooltip: string;
  readonly background: "error" | "warning" | undefined;
}

export function statusView(state: ServerState, jobs: readonly JobStatus[]): StatusView {
  const job = jobs[0];
  if (state.kind === "running" && job !== undefined) {
    const more = jobs.length > 1 ? ` (+${jobs.length - 1})` : "";
    const progress = job.state === "queued" ? "queued" : `${job.done}/${job.budget}`;
    const best = job.best === null ? "" : ` · ${job.best.toFixed(2)}×`;
    const lines = [`Tuning ${job.kernel}: ${progress}`];
    if (job.best !== null) {
      lines.push(`Best so far: ${job.best.toFixed(2)}× faster`);
    }
    if (job.message !== "") {
      lines.push(job.message);
    }
    lines.push("Click to show its progress or cancel it.");
    return { text: `$(sync~spin) cutune: ${job.kernel} ${progress}${best}${more}`, tooltip: lines.join("\n"), background: undefined };
  }
  switch (state.kind) {
    case "starting":
      return { text: "$(loading~spin) cutune", tooltip: "cutune: starting the server…", background: undefined };
    case "running":
      return { text: "$(zap) cutune", tooltip: `cutune: server running (${state.interpreter})`, background: undefined };
    case "stopped":
      return { text: "$(circle-slash) cutune", tooltip: "cutune: server stopped. Click to restart it.", background: undefined };
    case "unavailable":
      return { text: `$(warning) cutune: ${state.label}`, tooltip: state.reason, background: "warning" };
    case "crashed":
      return { text: "$(error) cutune: stopped", tooltip: `${state.reason}\nClick to restart it or open the log.`, background: "error" };
  }
}
