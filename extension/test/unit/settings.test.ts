import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";

import {
  CLIENT_SETTINGS,
  LIBRARY_SETTINGS,
  SERVER_SETTINGS,
  changeEffect,
  readClientSettings,
  readServerSettings,
  type Json,
} from "../../src/common/settings";

const root = path.resolve(__dirname, "../../..");

interface ManifestProperty {
  readonly default: unknown;
  readonly enum?: readonly unknown[];
  readonly description?: string;
  readonly markdownDescription?: string;
}

function manifestProperties(): Record<string, ManifestProperty> {
  const manifest = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as {
    contributes: { configuration: { properties: Record<string, ManifestProperty> } };
  };
  return manifest.contributes.configuration.properties;
}

/** The rows of the Settings table in docs/protocol.md: key, default, and the enum values when it has them. */
function protocolSettings(): Map<string, { default: unknown; values: string[] | undefined }> {
  const doc = readFileSync(path.join(root, "..", "docs", "protocol.md"), "utf8");
  const section = doc.split("## Settings")[1]?.split("\n## ")[0] ?? "";
  const rows = new Map<string, { default: unknown; values: string[] | undefined }>();
  for (const line of section.split("\n")) {
    const cells = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
    const key = /^`([\w.]+)`$/.exec(cells[1] ?? "")?.[1];
    if (key === undefined) {
      continue;
    }
    const type = cells[2] ?? "";
    const values = type.includes('"') ? [...type.matchAll(/"([^"]*)"/g)].map((m) => m[1] ?? "") : undefined;
    rows.set(key, { default: JSON.parse((cells[3] ?? "").replaceAll("`", "")), values });
  }
  return rows;
}

describe("settings", () => {
  it("sends every server setting, nested, with its default when unset", () => {
    assert.deepEqual(readServerSettings(() => undefined), {
      agent: { kind: "builtin", baseUrl: "", model: "", autotune: false, maxIterations: 3, targetPct: 85, stepTrials: 32 },
      budget: { trials: 200, seconds: 600 },
      capture: { command: "", data: false },
      arch: "sm_90",
      variants: true,
      timing: "events",
      storageUrl: "",
      backend: "auto",
      replayFile: "",
      replayPace: 0,
      logLevel: "info",
    });
  });

  it("forwards values as set, invalid ones too (the server names them in a warning)", () => {
    const set: Record<string, Json> = { "agent.kind": "openai", "budget.trials": 12, backend: "nonsense" };
    const wire = readServerSettings((key) => set[key]);
    assert.deepEqual(wire["agent"], { kind: "openai", baseUrl: "", model: "", autotune: false, maxIterations: 3, targetPct: 85, stepTrials: 32 });
    assert.deepEqual(wire["budget"], { trials: 12, seconds: 600 });
    assert.equal(wire["backend"], "nonsense");
    assert.equal("interpreter" in wire, false);
  });

  it("reads the client settings, ignoring values of the wrong type", () => {
    assert.deepEqual(readClientSettings((key) => ({ interpreter: " /opt/py/bin/python ", serverArgs: ["-v", 3] })[key]), {
      interpreter: "/opt/py/bin/python",
      serverArgs: ["-v"],
    });
    assert.deepEqual(readClientSettings(() => 42), { interpreter: "", serverArgs: [] });
  });

  it("restarts for the interpreter and server arguments, notifies for the rest", () => {
    assert.equal(changeEffect((s) => s === "cutune.interpreter"), "restart");
    assert.equal(changeEffect((s) => s === "cutune.serverArgs"), "restart");
    assert.equal(changeEffect((s) => s === "cutune.budget.trials"), "notify");
    assert.equal(changeEffect((s) => s === "editor.fontSize"), "none");
  });

  it("matches the settings package.json contributes: keys, defaults and enums", () => {
    const properties = manifestProperties();
    const specs: Record<string, { default: unknown; values?: readonly unknown[] }> = {
      ...SERVER_SETTINGS,
      ...CLIENT_SETTINGS,
      ...LIBRARY_SETTINGS,
    };
    assert.deepEqual(Object.keys(properties).sort(), Object.keys(specs).map((k) => `cutune.${k}`).sort());
    for (const [key, spec] of Object.entries(specs)) {
      const property = properties[`cutune.${key}`];
      assert.ok(property, key);
      assert.deepEqual(property.default, spec.default, `default of ${key}`);
      assert.deepEqual(property.enum, spec.values, `enum of ${key}`);
      assert.ok((property.markdownDescription ?? property.description ?? "").length > 10, `description of ${key}`);
    }
  });

  it("matches the settings table of docs/protocol.md", () => {
    const protocol = protocolSettings();
    assert.deepEqual([...protocol.keys()].sort(), Object.keys(SERVER_SETTINGS).sort());
    for (const [key, spec] of Object.entries(SERVER_SETTINGS)) {
      const row = protocol.get(key);
      assert.deepEqual(row?.default, spec.default, `default of ${key}`);
      assert.deepEqual(row.values, "values" in spec ? [...spec.values] : undefined, `values of ${key}`);
    }
  });
});
