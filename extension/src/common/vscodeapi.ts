// The one module that uses the `vscode` namespace at run time (besides the language client in server.ts).
// Everything else takes what it needs from here, so its logic can be tested without VS Code.

import * as vscode from "vscode";

import type { SettingReader } from "./settings";
import type { StatusView } from "./status";
import type { ShownLines } from "./visible";

export const SECTION = "cutune";

export function cutuneSettings(scope?: vscode.ConfigurationScope): SettingReader {
  const configuration = vscode.workspace.getConfiguration(SECTION, scope);
  return (key) => configuration.get(key);
}

export function onDidChangeConfiguration(
  listener: (e: vscode.ConfigurationChangeEvent) => unknown,
): vscode.Disposable {
  return vscode.workspace.onDidChangeConfiguration(listener);
}

export function firstWorkspaceFolder(): vscode.WorkspaceFolder | undefined {
  return vscode.workspace.workspaceFolders?.[0];
}

export function createLogChannel(name: string): vscode.LogOutputChannel {
  return vscode.window.createOutputChannel(name, { log: true });
}

export function createStatusItem(command: string): vscode.StatusBarItem {
  const item = vscode.window.createStatusBarItem("cutune.status", vscode.StatusBarAlignment.Left, 10);
  item.name = "cutune";
  item.command = command;
  return item;
}

export function renderStatus(item: vscode.StatusBarItem, view: StatusView): void {
  item.text = view.text;
  item.tooltip = view.tooltip;
  item.backgroundColor =
    view.background === undefined ? undefined : new vscode.ThemeColor(`statusBarItem.${view.background}Background`);
  item.show();
}

export function registerCommand(id: string, run: (...args: unknown[]) => unknown): vscode.Disposable {
  return vscode.commands.registerCommand(id, run);
}

export function executeCommand<T = unknown>(id: string, ...args: unknown[]): Thenable<T> {
  return vscode.commands.executeCommand<T>(id, ...args);
}

export function showError(message: string, ...actions: string[]): Thenable<string | undefined> {
  return vscode.window.showErrorMessage(message, ...actions);
}

export function showWarning(message: string, ...actions: string[]): Thenable<string | undefined> {
  return vscode.window.showWarningMessage(message, ...actions);
}

export function showInfo(message: string, ...actions: string[]): Thenable<string | undefined> {
  return vscode.window.showInformationMessage(message, ...actions);
}

export function showQuickPick<T extends vscode.QuickPickItem>(
  items: readonly T[],
  placeHolder: string,
): Thenable<T | undefined> {
  return vscode.window.showQuickPick(items, { placeHolder });
}

export function activeEditor(): vscode.TextEditor | undefined {
  return vscode.window.activeTextEditor;
}

/** Calls `listener` with the lines each editor of a matching document shows: now, and whenever they change. */
export function onDidChangeShownLines(
  selector: vscode.DocumentSelector,
  listener: (uri: string, shown: ShownLines[]) => void,
): vscode.Disposable {
  const report = (editor: vscode.TextEditor): void => {
    if (vscode.languages.match(selector, editor.document) > 0) {
      listener(
        editor.document.uri.toString(),
        editor.visibleRanges.map((r) => ({ first: r.start.line, last: r.end.line })),
      );
    }
  };
  vscode.window.visibleTextEditors.forEach(report);
  return vscode.Disposable.from(
    vscode.window.onDidChangeTextEditorVisibleRanges((e) => {
      report(e.textEditor);
    }),
    vscode.window.onDidChangeVisibleTextEditors((editors) => {
      editors.forEach(report);
    }),
  );
}

/** Read-only markdown documents (`cutune-results:/<name>.md`) that `showMarkdown` fills. */
class MarkdownDocuments implements vscode.TextDocumentContentProvider {
  static readonly scheme = "cutune-results";
  private readonly contents = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;

  set(name: string, markdown: string): vscode.Uri {
    const uri = vscode.Uri.from({ scheme: MarkdownDocuments.scheme, path: `/${name}.md` });
    this.contents.set(uri.toString(), markdown);
    this.changed.fire(uri);
    return uri;
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.contents.get(uri.toString()) ?? "";
  }
}

const markdownDocuments = new MarkdownDocuments();

export function registerMarkdownDocuments(): vscode.Disposable {
  return vscode.workspace.registerTextDocumentContentProvider(MarkdownDocuments.scheme, markdownDocuments);
}

/** Shows markdown in a preview beside the editor (as read-only text where the markdown extension is missing). */
export async function showMarkdown(name: string, markdown: string): Promise<void> {
  const uri = markdownDocuments.set(name, markdown);
  try {
    await vscode.commands.executeCommand("markdown.showPreviewToSide", uri);
  } catch {
    const document = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(document, { viewColumn: vscode.ViewColumn.Beside, preview: true });
  }
}

const panels = new Map<string, vscode.WebviewPanel>();

/** Shows a static page (no scripts) in a webview beside the editor, one panel per `key`, reused when open. */
export function showPage(key: string, title: string, render: (cspSource: string) => string): void {
  let panel = panels.get(key);
  if (panel === undefined) {
    panel = vscode.window.createWebviewPanel("cutune.results", title, {
      viewColumn: vscode.ViewColumn.Beside,
      preserveFocus: true,
    });
    panels.set(key, panel);
    panel.onDidDispose(() => panels.delete(key));
  } else {
    panel.reveal(vscode.ViewColumn.Beside, true);
  }
  panel.title = title;
  panel.webview.html = render(panel.webview.cspSource);
}

export function copyToClipboard(text: string): Thenable<void> {
  return vscode.env.clipboard.writeText(text);
}

export function openSettings(query: string): Thenable<unknown> {
  return vscode.commands.executeCommand("workbench.action.openSettings", query);
}

export function getExtension<T>(id: string): vscode.Extension<T> | undefined {
  return vscode.extensions.getExtension<T>(id);
}
