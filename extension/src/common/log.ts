// The extension's log: one output channel ("cutune") shared with the language client, which writes the
// server's stderr and the LSP trace into it. Holds the channel behind a small interface so tests can record lines.

/** The part of VS Code's LogOutputChannel the extension writes to. */
export interface LogSink {
  info(message: string): void;
  warn(message: string): void;
  error(message: string | Error): void;
  show(preserveFocus?: boolean): void;
}

let sink: LogSink | undefined;

export function setLogSink(next: LogSink | undefined): void {
  sink = next;
}

export function logInfo(message: string): void {
  sink?.info(message);
}

export function logWarning(message: string): void {
  sink?.warn(message);
}

export function logError(message: string, error?: unknown): void {
  sink?.error(error === undefined ? message : `${message}: ${errorText(error)}`);
}

export function showLog(): void {
  sink?.show(false);
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
