// Starts, restarts and stops `cutune serve`, and keeps the status bar in step with it.

import { spawn, type ChildProcess } from "node:child_process";

import {
  CloseAction,
  DidChangeConfigurationNotification,
  ErrorAction,
  LanguageClient,
  RevealOutputChannelOn,
  type LanguageClientOptions,
  type Middleware,
} from "vscode-languageclient/node";
import type { LogOutputChannel } from "vscode";

import { errorText, logError, logInfo, showLog } from "./log";
import {
  checkInterpreter,
  describeProblem,
  installCommand,
  problemLabel,
  resolveInterpreter,
  serverCommand,
  which,
  type InterpreterSource,
  type Problem,
} from "./python";
import { activeEnvironmentExecutable } from "./pythonExtension";
import { readClientSettings, readServerSettings } from "./settings";
import { JOB_STATUS_NOTIFICATION, parseJobStatus, type JobStatus, type ServerState } from "./status";
import { ShownLinesReporter, VISIBLE_RANGES_NOTIFICATION } from "./visible";
import * as vscodeapi from "./vscodeapi";

export const DOCUMENT_SELECTOR = [
  { scheme: "file", language: "cuda-cpp" },
  { scheme: "file", language: "cuda" },
  { scheme: "file", language: "cpp", pattern: "**/*.{cu,cuh}" },
];

const STOP_TIMEOUT_MS = 5_000;
const EXIT_WAIT_MS = 2_000;
const STDERR_TAIL_LINES = 20;

export interface ServerEvents {
  onState(state: ServerState): void;
  onJobStatus(job: JobStatus): void;
  /** Called after a server command ran (from a lens, a code action or the palette), with its result. */
  onCommandResult(command: string, args: unknown[], result: unknown): Promise<void>;
}

export class CutuneServer {
  private client: LanguageClient | undefined;
  private process: ChildProcess | undefined;
  private stderrTail: string[] = [];
  private stopping = false;
  /** Set once the current start's failure or crash has been reported, so that it is reported once. */
  private reported = false;
  private queue: Promise<void> = Promise.resolve();
  private interpreterSource: InterpreterSource | undefined;
  private shownLines: { dispose(): void } | undefined;

  constructor(
    private readonly channel: LogOutputChannel,
    private readonly events: ServerEvents,
  ) {}

  /** The running client, or undefined while the server is not running. */
  get running(): LanguageClient | undefined {
    return this.client?.isRunning() === true ? this.client : undefined;
  }

  /** Where the interpreter came from at the last start. */
  get source(): InterpreterSource | undefined {
    return this.interpreterSource;
  }

  /** Stops the server if it runs, then starts it. Calls are serialized. */
  restart(): Promise<void> {
    this.queue = this.queue.then(
      () => this.doRestart(),
      () => this.doRestart(),
    );
    return this.queue;
  }

  stop(): Promise<void> {
    this.queue = this.queue.then(() => this.doStop());
    return this.queue;
  }

  /** Sends the current server settings (`workspace/didChangeConfiguration`). */
  async notifySettingsChanged(): Promise<void> {
    const client = this.running;
    if (client !== undefined) {
      await client.sendNotification(DidChangeConfigurationNotification.type, { settings: this.serverSettings() });
    }
  }

  private async doRestart(): Promise<void> {
    await this.doStop();
    await this.doStart();
  }

  private async doStart(): Promise<void> {
    this.events.onState({ kind: "starting" });
    const folder = vscodeapi.firstWorkspaceFolder();
    const settings = readClientSettings(vscodeapi.cutuneSettings(folder));
    const resolved = await resolveInterpreter({
      configured: settings.interpreter,
      workspaceFolder: folder?.uri.fsPath,
      pythonExtension: () => activeEnvironmentExecutable(folder?.uri),
      which: (command) => which(command),
    });
    this.interpreterSource = resolved.ok ? resolved.interpreter.source : undefined;
    const checked = resolved.ok ? await checkInterpreter(resolved.interpreter) : resolved;
    if (!checked.ok) {
      this.reportProblem(checked.problem);
      return;
    }
    const { executable, source } = checked.interpreter;
    const { command, args } = serverCommand(executable, settings.serverArgs);
    logInfo(`Starting the server (Python from ${source}): ${command} ${args.map((a) => JSON.stringify(a)).join(" ")}`);

    this.reported = false;
    const client = new QuietLanguageClient(
      "cutune",
      "cutune",
      () => Promise.resolve(this.spawnServer(command, args, folder?.uri.fsPath)),
      this.clientOptions(),
    );
    client.onNotification(JOB_STATUS_NOTIFICATION, (params: unknown) => {
      const job = parseJobStatus(params);
      if (job !== undefined) {
        this.events.onJobStatus(job);
      }
    });
    this.client = client;
    try {
      await client.start();
      this.watchShownLines(client);
      this.events.onState({ kind: "running", interpreter: executable });
      logInfo("The server is running.");
    } catch (error) {
      logError("The server failed to start", error);
      const exited = await this.processExited(EXIT_WAIT_MS);
      this.reportCrash(exited ? this.crashReason() : `The cutune server failed to start: ${errorText(error)}`);
    }
  }

  /** Tells the server which lines each editor shows (documents of many kernels get lenses near those only). */
  private watchShownLines(client: LanguageClient): void {
    const reporter = new ShownLinesReporter((params) => {
      client.sendNotification(VISIBLE_RANGES_NOTIFICATION, params).catch(() => undefined);
    });
    const watching = vscodeapi.onDidChangeShownLines(DOCUMENT_SELECTOR, (uri, shown) => {
      reporter.report(uri, shown);
    });
    this.shownLines = {
      dispose: () => {
        watching.dispose();
        reporter.dispose();
      },
    };
  }

  private async doStop(): Promise<void> {
    this.shownLines?.dispose();
    this.shownLines = undefined;
    const client = this.client;
    this.client = undefined;
    if (client === undefined) {
      return;
    }
    this.stopping = true;
    try {
      if (client.needsStop()) {
        await client.stop(STOP_TIMEOUT_MS);
      }
    } catch (error) {
      logError("Stopping the server failed", error);
    } finally {
      this.process?.kill();
      this.process = undefined;
      this.stopping = false;
      await client.dispose().catch(() => undefined);
    }
    this.events.onState({ kind: "stopped" });
  }

  private spawnServer(command: string, args: string[], cwd: string | undefined): ChildProcess {
    this.stderrTail = [];
    const child = spawn(command, args, {
      cwd,
      env: { ...process.env, PYTHONUNBUFFERED: "1" },
      stdio: ["pipe", "pipe", "pipe"],
    });
    child.stderr.on("data", (data: Buffer) => {
      this.stderrTail.push(...data.toString("utf8").split("\n").filter((line) => line.trim() !== ""));
      this.stderrTail.splice(0, Math.max(0, this.stderrTail.length - STDERR_TAIL_LINES));
    });
    child.on("exit", (code, signal) => {
      logInfo(`The server exited (${signal ?? `code ${code}`}).`);
    });
    this.process = child;
    return child;
  }

  private clientOptions(): LanguageClientOptions {
    return {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.channel,
      traceOutputChannel: this.channel,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      initializationOptions: () => this.serverSettings(),
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue, handled: true }),
        closed: async () => {
          if (!this.stopping && this.client?.isRunning() === true) {
            await this.processExited(EXIT_WAIT_MS);
            this.reportCrash(this.crashReason());
          }
          return { action: CloseAction.DoNotRestart, handled: true };
        },
      },
      initializationFailedHandler: (error) => {
        logError("The server failed to initialize", error);
        return false;
      },
      middleware: this.middleware(),
    };
  }

  private middleware(): Middleware {
    return {
      workspace: {
        // Answer `workspace/configuration` for our section with the same payload as initializationOptions.
        configuration: async (params, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) {
            return answers;
          }
          return params.items.map((item, i) =>
            item.section === vscodeapi.SECTION ? this.serverSettings() : (answers[i] as unknown),
          );
        },
        // notifySettingsChanged sends the change; the library's own notification would duplicate it.
        didChangeConfiguration: () => Promise.resolve(),
      },
      executeCommand: async (command, args, next) => {
        const result: unknown = await next(command, args);
        await this.events.onCommandResult(command, args, result);
        return result;
      },
    };
  }

  private serverSettings(): ReturnType<typeof readServerSettings> {
    return readServerSettings(vscodeapi.cutuneSettings(vscodeapi.firstWorkspaceFolder()));
  }

  private reportProblem(problem: Problem): void {
    const message = describeProblem(problem);
    logError(message);
    this.events.onState({ kind: "unavailable", label: problemLabel(problem), reason: message });
    const actions = problem.kind === "cutune-missing" || problem.kind === "server-missing" ? [COPY_INSTALL] : [];
    void vscodeapi.showError(message, ...actions, OPEN_SETTINGS, OPEN_LOG).then(async (choice) => {
      if (choice === COPY_INSTALL && "executable" in problem) {
        await vscodeapi.copyToClipboard(installCommand(problem.executable));
      } else if (choice === OPEN_SETTINGS) {
        await vscodeapi.openSettings("cutune.interpreter");
      } else if (choice === OPEN_LOG) {
        showLog();
      }
    });
  }

  /** Waits until the server process has exited (true) or the time is up (false). */
  private processExited(timeoutMs: number): Promise<boolean> {
    const child = this.process;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) {
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        resolve(false);
      }, timeoutMs);
      child.once("exit", () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
  }

  private crashReason(): string {
    const child = this.process;
    const how = child?.signalCode ?? (child?.exitCode === null || child === undefined ? undefined : `exit code ${child.exitCode}`);
    const last = this.stderrTail[this.stderrTail.length - 1];
    return `The cutune server stopped unexpectedly${how === undefined ? "" : ` (${how})`}${last === undefined ? "." : `: ${last}`}`;
  }

  private reportCrash(reason: string): void {
    if (this.reported) {
      return;
    }
    this.reported = true;
    logError(reason);
    this.events.onState({ kind: "crashed", reason });
    void vscodeapi.showError(reason, RESTART, OPEN_LOG).then((choice) => {
      if (choice === RESTART) {
        void this.restart();
      } else if (choice === OPEN_LOG) {
        showLog();
      }
    });
  }
}

/** The extension reports start failures and crashes itself, once, with the server's last words and actions. */
class QuietLanguageClient extends LanguageClient {
  override error(message: string, data?: unknown, showNotification?: boolean | "force"): void {
    super.error(message, data, showNotification === "force" ? false : showNotification);
  }
}

const RESTART = "Restart Server";
const OPEN_LOG = "Open Log";
const OPEN_SETTINGS = "Open Settings";
const COPY_INSTALL = "Copy Install Command";
