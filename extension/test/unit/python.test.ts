import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, it } from "node:test";

import {
  checkInterpreter,
  classifyProbe,
  describeProblem,
  expandVariables,
  installCommand,
  resolveInterpreter,
  serverCommand,
  which,
  type Interpreter,
  type InterpreterSources,
} from "../../src/common/python";

function sources(overrides: Partial<InterpreterSources>): InterpreterSources {
  return {
    configured: "",
    workspaceFolder: "/work/ws",
    pythonExtension: () => Promise.resolve(undefined),
    which: (command) => Promise.resolve(command === "python3" ? "/usr/bin/python3" : undefined),
    ...overrides,
  };
}

describe("interpreter resolution", () => {
  it("takes cutune.interpreter first, without asking the Python extension", async () => {
    let asked = false;
    const resolution = await resolveInterpreter(
      sources({
        configured: "${workspaceFolder}/.venv/bin/python",
        pythonExtension: () => {
          asked = true;
          return Promise.resolve("/env/bin/python");
        },
      }),
    );
    assert.deepEqual(resolution, { ok: true, interpreter: { executable: "/work/ws/.venv/bin/python", source: "setting" } });
    assert.equal(asked, false);
  });

  it("looks a bare command in cutune.interpreter up on PATH", async () => {
    const found = await resolveInterpreter(sources({ configured: "python3" }));
    assert.deepEqual(found, { ok: true, interpreter: { executable: "/usr/bin/python3", source: "setting" } });
    const missing = await resolveInterpreter(sources({ configured: "python3.99" }));
    assert.deepEqual(missing, {
      ok: false,
      problem: { kind: "interpreter-not-found", executable: "python3.99", source: "setting" },
    });
  });

  it("takes the Python extension's active environment next", async () => {
    const resolution = await resolveInterpreter(sources({ pythonExtension: () => Promise.resolve("/env/bin/python") }));
    assert.deepEqual(resolution, { ok: true, interpreter: { executable: "/env/bin/python", source: "python-extension" } });
  });

  it("falls back to python3 on PATH, and says so when there is none", async () => {
    assert.deepEqual(await resolveInterpreter(sources({})), {
      ok: true,
      interpreter: { executable: "/usr/bin/python3", source: "path" },
    });
    const none = await resolveInterpreter(sources({ which: () => Promise.resolve(undefined) }));
    assert.deepEqual(none, { ok: false, problem: { kind: "no-python" } });
    assert.match(describeProblem({ kind: "no-python" }), /python3.*not on PATH.*cutune\.interpreter/);
  });

  it("expands ~ and ${userHome}", () => {
    assert.equal(expandVariables("~/py/bin/python", undefined), path.join(os.homedir(), "py/bin/python"));
    assert.equal(expandVariables("${userHome}/x", undefined), `${os.homedir()}/x`);
    assert.equal(expandVariables("${workspaceFolder}/x", undefined), "${workspaceFolder}/x");
  });

  it("finds executables on a given PATH", async () => {
    assert.equal(await which("sh", "/nonexistent:/bin"), "/bin/sh");
    assert.equal(await which("no-such-command-here", "/bin"), undefined);
  });
});

describe("interpreter check", () => {
  const interpreter: Interpreter = { executable: "/opt/py/bin/python", source: "path" };
  const outcome = { spawnError: undefined, stdout: "3.11.7\n", stderr: "" };

  it("classifies the probe's exit", () => {
    assert.deepEqual(classifyProbe(interpreter, { ...outcome, code: 0 }), { ok: true, interpreter });
    assert.deepEqual(classifyProbe(interpreter, { ...outcome, code: 4 }), {
      ok: false,
      problem: { kind: "cutune-missing", executable: "/opt/py/bin/python" },
    });
    assert.deepEqual(classifyProbe(interpreter, { ...outcome, code: 3, stdout: "3.9.1\n" }), {
      ok: false,
      problem: { kind: "python-too-old", executable: "/opt/py/bin/python", version: "3.9.1" },
    });
    assert.deepEqual(classifyProbe(interpreter, { ...outcome, code: null, spawnError: "ENOENT" }), {
      ok: false,
      problem: { kind: "interpreter-not-found", executable: "/opt/py/bin/python", source: "path" },
    });
    const broken = classifyProbe(interpreter, { ...outcome, code: 1, stderr: "Traceback\nSyntaxError: oops\n" });
    assert.deepEqual(broken, {
      ok: false,
      problem: { kind: "server-missing", executable: "/opt/py/bin/python", detail: "SyntaxError: oops" },
    });
  });

  it("names the install command when cutune is missing", () => {
    const message = describeProblem({ kind: "cutune-missing", executable: "/opt/my py/bin/python" });
    assert.equal(message, "cutune is not installed in `/opt/my py/bin/python`. Install it with: '/opt/my py/bin/python' -m pip install cutune");
    assert.equal(installCommand("/usr/bin/python3"), "/usr/bin/python3 -m pip install cutune");
  });

  // A real Python, with a fake cutune on PYTHONPATH, through a wrapper script standing for the interpreter.
  const dir = mkdtempSync(path.join(os.tmpdir(), "cutune-probe-"));
  after(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  function fakePython(packageFiles: string[]): Interpreter {
    const site = mkdtempSync(path.join(dir, "site-"));
    for (const file of packageFiles) {
      mkdirSync(path.join(site, path.dirname(file)), { recursive: true });
      writeFileSync(path.join(site, file), "");
    }
    const executable = path.join(site, "python");
    writeFileSync(executable, `#!/bin/sh\nPYTHONPATH='${site}' PYTHONNOUSERSITE=1 exec python3 -S "$@"\n`);
    chmodSync(executable, 0o755);
    return { executable, source: "setting" };
  }

  it("runs the probe with a real Python", async () => {
    const withServer = fakePython(["cutune/__init__.py", "cutune/__main__.py"]);
    assert.deepEqual(await checkInterpreter(withServer), { ok: true, interpreter: withServer });
    const without = fakePython([]);
    assert.deepEqual(await checkInterpreter(without), {
      ok: false,
      problem: { kind: "cutune-missing", executable: without.executable },
    });
    const noServer = fakePython(["cutune/__init__.py"]);
    const result = await checkInterpreter(noServer);
    assert.equal(!result.ok && result.problem.kind, "server-missing");
    const nowhere = await checkInterpreter({ executable: path.join(dir, "no-python"), source: "setting" });
    assert.equal(!nowhere.ok && nowhere.problem.kind, "interpreter-not-found");
  });

  it("starts the server as `python -m cutune serve`", () => {
    assert.deepEqual(serverCommand("/py", ["--tcp", "127.0.0.1:2087"]), {
      command: "/py",
      args: ["-m", "cutune", "serve", "--tcp", "127.0.0.1:2087"],
    });
  });
});
