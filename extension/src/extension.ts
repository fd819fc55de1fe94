// cutune for VS Code: starts `cutune serve` (a language server, docs/protocol.md) for CUDA files, contributes the
// palette commands and a status-bar item, and forwards setting changes to the server.

import type { ExtensionContext } from "vscode";

import { COMMANDS, SERVER_COMMANDS, onCommandResult, registerCommands } from "./common/commands";
import { logInfo, setLogSink, showLog } from "./common/log";
import { onDidChangeActiveEnvironment } from "./common/pythonExtension";
import { CutuneServer } from "./common/server";
import { changeEffect } from "./common/settings";
import { JobBoard, statusView, type JobStatus, type ServerState } from "./common/status";
import * as vscodeapi from "./common/vscodeapi";

let server: CutuneServer | undefined;

export async function activate(context: ExtensionContext): Promise<void> {
  const channel = vscodeapi.createLogChannel("cutune");
  setLogSink(channel);
  const item = vscodeapi.createStatusItem(COMMANDS.showStatus);
  context.subscriptions.push(channel, item, vscodeapi.registerMarkdownDocuments());

  let state: ServerState = { kind: "starting" };
  const jobs = new JobBoard();
  const refresh = (): void => {
    vscodeapi.renderStatus(item, statusView(state, jobs.active()));
  };

  server = new CutuneServer(channel, {
    onState: (next) => {
      state = next;
      if (next.kind !== "running") {
        jobs.clear();
      }
      refresh();
    },
    onJobStatus: (job) => {
      jobs.update(job);
      refresh();
      reportFinishedJob(job);
    },
    onCommandResult,
  });
  const current = server;

  context.subscriptions.push(
    ...registerCommands(current, { state: () => state, jobs: () => jobs.active() }),
    vscodeapi.onDidChangeConfiguration(async (event) => {
      const effect = changeEffect((section) => event.affectsConfiguration(section));
      if (effect === "restart") {
        logInfo("The interpreter or server arguments changed: restarting the server.");
        await current.restart();
      } else if (effect === "notify") {
        await current.notifySettingsChanged();
      }
    }),
  );
  const pythonEnvironment = await onDidChangeActiveEnvironment(() => {
    if (current.source === "python-extension") {
      logInfo("The Python extension's environment changed: restarting the server.");
      void current.restart();
    }
  });
  if (pythonEnvironment !== undefined) {
    context.subscriptions.push(pythonEnvironment);
  }

  refresh();
  void current.restart();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
  server = undefined;
  setLogSink(undefined);
}

function reportFinishedJob(job: JobStatus): void {
  if (job.state === "done") {
    // the results view beside the editor: bars against the floor, the trials, the agent's steps
    void vscodeapi.executeCommand(SERVER_COMMANDS.resultsView, { uri: job.uri, kernel: job.kernel });
  }
  if (job.state === "failed") {
    void vscodeapi.showError(`cutune: tuning ${job.kernel} failed. ${job.message}`, "Open Log").then((choice) => {
      if (choice === "Open Log") {
        showLog();
      }
    });
  }
}
