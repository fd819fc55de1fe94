// Which Python runs the server, whether cutune is installed in it, and the command line that starts it.
//
// Resolution order: the `cutune.interpreter` setting; else the Python extension's active environment when that
// extension is installed (it is never required); else `python3` on PATH.

import { execFile } from "node:child_process";
import { constants as fsConstants } from "node:fs";
import { access } from "node:fs/promises";
import * as os from "node:os";
import * as path from "node:path";

export type InterpreterSource = "setting" | "python-extension" | "path";

export interface Interpreter {
  /** Absolute path of the executable (or the bare command when it comes from the setting and is not a path). */
  readonly executable: string;
  readonly source: InterpreterSource;
}

/** Where an interpreter can come from; the extension fills this in from VS Code, the tests with plain values. */
export interface InterpreterSources {
  /** `cutune.interpreter` as written; "" when unset. */
  readonly configured: string;
  readonly workspaceFolder: string | undefined;
  /** The Python extension's active environment, or undefined when that extension is absent or has none. */
  readonly pythonExtension: () => Promise<string | undefined>;
  /** Finds a command on PATH. */
  readonly which: (command: string) => Promise<string | undefined>;
}

export type Resolution =
  | { readonly ok: true; readonly interpreter: Interpreter }
  | { readonly ok: false; readonly problem: Problem };

export type Problem =
  | { readonly kind: "no-python" }
  | { readonly kind: "interpreter-not-found"; readonly executable: string; readonly source: InterpreterSource }
  | { readonly kind: "python-too-old"; readonly executable: string; readonly version: string }
  | { readonly kind: "cutune-missing"; readonly executable: string }
  | { readonly kind: "server-missing"; readonly executable: string; readonly detail: string };

export const FALLBACK_PYTHON = "python3";
export const MINIMUM_PYTHON = "3.11";

export async function resolveInterpreter(sources: InterpreterSources): Promise<Resolution> {
  if (sources.configured !== "") {
    const executable = expandVariables(sources.configured, sources.workspaceFolder);
    const found = looksLikePath(executable) ? executable : await sources.which(executable);
    return found === undefined
      ? { ok: false, problem: { kind: "interpreter-not-found", executable, source: "setting" } }
      : { ok: true, interpreter: { executable: found, source: "setting" } };
  }
  const fromExtension = await sources.pythonExtension();
  if (fromExtension !== undefined && fromExtension !== "") {
    return { ok: true, interpreter: { executable: fromExtension, source: "python-extension" } };
  }
  const onPath = await sources.which(FALLBACK_PYTHON);
  return onPath === undefined
    ? { ok: false, problem: { kind: "no-python" } }
    : { ok: true, interpreter: { executable: onPath, source: "path" } };
}

/** Expands `${workspaceFolder}`, `${userHome}` and a leading `~`. */
export function expandVariables(value: string, workspaceFolder: string | undefined): string {
  const home = os.homedir();
  let expanded = value.replaceAll("${userHome}", home);
  if (workspaceFolder !== undefined) {
    expanded = expanded.replaceAll("${workspaceFolder}", workspaceFolder);
  }
  if (expanded === "~" || expanded.startsWith("~/")) {
    expanded = home + expanded.slice(1);
  }
  return expanded;
}

function looksLikePath(command: string): boolean {
  return command.includes("/") || command.includes("\\");
}

/** Finds an executable on PATH, like `which`. */
export async function which(command: string, searchPath = process.env["PATH"] ?? ""): Promise<string | undefined> {
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir === "") {
      continue;
    }
    const candidate = path.join(dir, command);
    try {
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not in this directory
    }
  }
  return undefined;
}

// Exit codes of PROBE_SCRIPT.
const PROBE_TOO_OLD = 3;
const PROBE_NO_CUTUNE = 4;
const PROBE_NO_SERVER = 5;

const PROBE_SCRIPT = `
import importlib.util, sys
print(sys.version.split()[0])
if sys.version_info < (${MINIMUM_PYTHON.replace(".", ", ")}):
    sys.exit(${PROBE_TOO_OLD})
if importlib.util.find_spec("cutune") is None:
    sys.exit(${PROBE_NO_CUTUNE})
if importlib.util.find_spec("cutune.__main__") is None:
    sys.exit(${PROBE_NO_SERVER})
`;

export interface ProbeOutcome {
  /** Exit code; null when the process could not be started or was killed. */
  readonly code: number | null;
  /** Set when the process could not be started (`ENOENT`, `EACCES`, ...). */
  readonly spawnError: string | undefined;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the probe with the interpreter and says whether it can run the server. */
export async function checkInterpreter(interpreter: Interpreter, timeoutMs = 30_000): Promise<Resolution> {
  return classifyProbe(interpreter, await runProbe(interpreter.executable, timeoutMs));
}

function runProbe(executable: string, timeoutMs: number): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    execFile(executable, ["-c", PROBE_SCRIPT], { timeout: timeoutMs, encoding: "utf8" }, (error, stdout, stderr) => {
      const spawnError = error !== null && typeof error.code === "string" ? error.code : undefined;
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : null;
      resolve({ code, spawnError, stdout, stderr });
    });
  });
}

export function classifyProbe(interpreter: Interpreter, outcome: ProbeOutcome): Resolution {
  const executable = interpreter.executable;
  if (outcome.spawnError !== undefined) {
    return { ok: false, problem: { kind: "interpreter-not-found", executable, source: interpreter.source } };
  }
  switch (outcome.code) {
    case 0:
      return { ok: true, interpreter };
    case PROBE_TOO_OLD:
      return { ok: false, problem: { kind: "python-too-old", executable, version: outcome.stdout.trim() } };
    case PROBE_NO_CUTUNE:
      return { ok: false, problem: { kind: "cutune-missing", executable } };
    case PROBE_NO_SERVER:
      return { ok: false, problem: { kind: "server-missing", executable, detail: "it has no `python -m cutune`" } };
    default:
      return { ok: false, problem: { kind: "server-missing", executable, detail: lastLine(outcome.stderr) } };
  }
}

/** A few words for the status bar. */
export function problemLabel(problem: Problem): string {
  switch (problem.kind) {
    case "no-python":
    case "interpreter-not-found":
      return "no Python";
    case "python-too-old":
      return "Python too old";
    case "cutune-missing":
      return "not installed";
    case "server-missing":
      return "no server";
  }
}

/** The shell command that installs cutune into the interpreter. */
export function installCommand(executable: string): string {
  return `${shellQuote(executable)} -m pip install cutune`;
}

/** A one-line message for the user, naming the fix. */
export function describeProblem(problem: Problem): string {
  switch (problem.kind) {
    case "no-python":
      return `cutune: no Python found (\`${FALLBACK_PYTHON}\` is not on PATH). Install Python ${MINIMUM_PYTHON}+ with cutune, or set \`cutune.interpreter\`.`;
    case "interpreter-not-found":
      return `cutune: the Python interpreter \`${problem.executable}\`${problem.source === "setting" ? " (setting `cutune.interpreter`)" : ""} cannot be run. Set \`cutune.interpreter\` to a Python ${MINIMUM_PYTHON}+ that has cutune installed.`;
    case "python-too-old":
      return `cutune: \`${problem.executable}\` is Python ${problem.version}; cutune needs Python ${MINIMUM_PYTHON} or newer. Set \`cutune.interpreter\`.`;
    case "cutune-missing":
      return `cutune is not installed in \`${problem.executable}\`. Install it with: ${installCommand(problem.executable)}`;
    case "server-missing":
      return `cutune in \`${problem.executable}\` cannot start its language server (${problem.detail}). Upgrade it with: ${installCommand(problem.executable)} --upgrade`;
  }
}

/**
 * The server's command line: `cutune serve` run as `python -m cutune serve`, so that it works whether or not the
 * environment's `bin/` is on PATH.
 */
export function serverCommand(executable: string, serverArgs: readonly string[]): { command: string; args: string[] } {
  return { command: executable, args: ["-m", "cutune", "serve", ...serverArgs] };
}

function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", `'"'"'`)}'`;
}

function lastLine(text: string): string {
  const lines = text.trim().split("\n");
  return lines[lines.length - 1]?.trim() || "the interpreter failed";
}
