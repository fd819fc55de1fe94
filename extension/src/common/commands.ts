// The palette commands, the status-bar menu, and what the extension shows after a server command ran.
// Server commands (docs/protocol.md) are registered by the language client under their own ids (`cutune.templatize`,
// ...); the palette commands find the kernel at the cursor and call them.

import type { Disposable, QuickPickItem } from "vscode";

import { showLog } from "./log";
import { kernelAtLine, kernelsFromLenses, type KernelTarget, type WireCodeLens } from "./kernels";
import { parseResultsView, resultsHtml } from "./resultsView";
import type { CutuneServer } from "./server";
import type { JobStatus, ServerState } from "./status";
import * as vscodeapi from "./vscodeapi";

/** Commands the server executes (`workspace/executeCommand`). */
export const SERVER_COMMANDS = {
  templatize: "cutune.templatize",
  autotune: "cutune.autotune",
  apply: "cutune.apply",
  cancel: "cutune.cancel",
  showResults: "cutune.showResults",
  resultsView: "cutune.resultsView",
  capture: "cutune.capture",
} as const;

/** Commands the extension contributes (package.json). */
export const COMMANDS = {
  templatize: "cutune.templatizeKernel",
  autotune: "cutune.autotuneKernel",
  apply: "cutune.applyConfiguration",
  capture: "cutune.captureLaunches",
  showResults: "cutune.showTuningResults",
  resultsView: "cutune.showResultsView",
  restart: "cutune.restartServer",
  openLog: "cutune.openLog",
  showStatus: "cutune.showStatus",
} as const;

export interface StatusSource {
  state(): ServerState;
  jobs(): readonly JobStatus[];
}

export function registerCommands(server: CutuneServer, status: StatusSource): Disposable[] {
  const onKernel = (serverCommand: string, wholeFileAllowed = false) => async () => {
    const target = await targetAtCursor(server, wholeFileAllowed);
    if (target !== undefined) {
      await vscodeapi.executeCommand(serverCommand, target);
    }
  };
  return [
    vscodeapi.registerCommand(COMMANDS.templatize, onKernel(SERVER_COMMANDS.templatize)),
    vscodeapi.registerCommand(COMMANDS.autotune, onKernel(SERVER_COMMANDS.autotune)),
    vscodeapi.registerCommand(COMMANDS.apply, onKernel(SERVER_COMMANDS.apply)),
    vscodeapi.registerCommand(COMMANDS.capture, onKernel(SERVER_COMMANDS.capture)),
    vscodeapi.registerCommand(COMMANDS.showResults, onKernel(SERVER_COMMANDS.showResults, true)),
    vscodeapi.registerCommand(COMMANDS.resultsView, onKernel(SERVER_COMMANDS.resultsView)),
    vscodeapi.registerCommand(COMMANDS.restart, () => server.restart()),
    vscodeapi.registerCommand(COMMANDS.openLog, () => {
      showLog();
    }),
    vscodeapi.registerCommand(COMMANDS.showStatus, () => showStatusMenu(server, status)),
  ];
}

/** Shows what a server command returned, whichever way it was invoked (lens, code action, palette). */
export async function onCommandResult(command: string, args: unknown[], result: unknown): Promise<void> {
  if (typeof result !== "object" || result === null) {
    return; // the request failed; the language client has shown its error
  }
  const r = result as Record<string, unknown>;
  const kernel = targetOf(args)?.kernel ?? "";
  switch (command) {
    case SERVER_COMMANDS.templatize: {
      const params = Array.isArray(r["params"]) ? r["params"].join(", ") : "";
      if (r["applied"] === true) {
        void vscodeapi.showInfo(`cutune: templatized ${kernel}${params === "" ? "" : ` (parameters: ${params})`}.`);
      } else {
        void vscodeapi.showWarning(`cutune: ${kernel} was not templatized.`);
      }
      return;
    }
    case SERVER_COMMANDS.apply:
      if (r["applied"] !== true) {
        void vscodeapi.showWarning(`cutune: no tuned configuration was applied to ${kernel}.`);
      }
      return;
    case SERVER_COMMANDS.capture:
      // the server has said what it wrote or why not; where the command is missing, lead to the setting
      if (typeof r["refused"] === "string" && r["refused"].includes("cutune.capture.command")) {
        void vscodeapi.showWarning("cutune: set the command that runs your kernels.", "Open Settings").then((choice) => {
          if (choice === "Open Settings") {
            void vscodeapi.openSettings("cutune.capture.command");
          }
        });
      }
      return;
    case SERVER_COMMANDS.cancel:
      if (r["cancelled"] !== true) {
        void vscodeapi.showInfo(`cutune: no tuning job runs for ${kernel}.`);
      }
      return;
    case SERVER_COMMANDS.resultsView: {
      const view = parseResultsView(result);
      if (view !== undefined) {
        vscodeapi.showPage(`results:${view.kernel}`, `cutune: ${view.kernel}`, (csp) => resultsHtml(view, csp));
      }
      return;
    }
    case SERVER_COMMANDS.showResults:
      if (typeof r["markdown"] === "string") {
        await vscodeapi.showMarkdown(`cutune results${kernel === "" ? "" : ` ${kernel}`}`, r["markdown"]);
      }
      return;
  }
}

function targetOf(args: readonly unknown[]): KernelTarget | undefined {
  const first = args[0];
  if (typeof first !== "object" || first === null) {
    return undefined;
  }
  const { uri, kernel } = first as Record<string, unknown>;
  return typeof uri === "string" && typeof kernel === "string" ? { uri, kernel } : undefined;
}

/** The kernel at the cursor of the active editor, asking the user when that is ambiguous. */
async function targetAtCursor(server: CutuneServer, wholeFileAllowed: boolean): Promise<KernelTarget | undefined> {
  const client = server.running;
  if (client === undefined) {
    void vscodeapi.showWarning("cutune: the server is not running.", "Restart Server", "Open Log").then((choice) => {
      if (choice === "Restart Server") {
        void server.restart();
      } else if (choice === "Open Log") {
        showLog();
      }
    });
    return undefined;
  }
  const editor = vscodeapi.activeEditor();
  if (editor === undefined) {
    void vscodeapi.showWarning("cutune: open a CUDA file and put the cursor in a kernel.");
    return undefined;
  }
  const uri = editor.document.uri.toString();
  // unresolved lenses name their kernel in their data: no resolve request per lens (60,000 on a large file)
  const lenses = await client.sendRequest<WireCodeLens[] | null>("textDocument/codeLens", { textDocument: { uri } });
  const kernels = kernelsFromLenses(lenses ?? []);
  const atCursor = kernelAtLine(kernels, editor.selection.active.line);
  if (atCursor !== undefined) {
    return { uri, kernel: atCursor };
  }
  const items: (QuickPickItem & { kernel: string })[] = kernels.map((k) => ({
    label: k.kernel,
    description: `line ${k.line + 1}`,
    kernel: k.kernel,
  }));
  if (wholeFileAllowed) {
    items.unshift({ label: "All kernels in this file", description: "", kernel: "" });
  }
  if (items.length === 0) {
    void vscodeapi.showWarning("cutune: no __global__ kernel in this file.");
    return undefined;
  }
  const picked = await vscodeapi.showQuickPick(items, "Which kernel?");
  return picked === undefined ? undefined : { uri, kernel: picked.kernel };
}

/** The menu behind the status-bar item: the running jobs (show progress, cancel), restart, log. */
async function showStatusMenu(server: CutuneServer, status: StatusSource): Promise<void> {
  type Item = QuickPickItem & { run: () => unknown };
  const items: Item[] = [];
  for (const job of status.jobs()) {
    items.push(
      {
        label: `$(bell) Show progress of ${job.kernel}`,
        description: `${job.done}/${job.budget}`,
        run: () => vscodeapi.executeCommand("notifications.showList"),
      },
      {
        label: `$(close) Cancel tuning ${job.kernel}`,
        run: () => vscodeapi.executeCommand(SERVER_COMMANDS.cancel, { uri: job.uri, kernel: job.kernel }),
      },
    );
  }
  if (status.state().kind === "unavailable") {
    items.push({ label: "$(gear) Choose the Python interpreter", run: () => vscodeapi.openSettings("cutune.interpreter") });
  }
  items.push(
    { label: "$(debug-restart) Restart server", run: () => server.restart() },
    {
      label: "$(output) Open log",
      run: () => {
        showLog();
      },
    },
  );
  const picked = await vscodeapi.showQuickPick(items, "cutune");
  await picked?.run();
}
