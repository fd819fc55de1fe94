// The extension's settings, read into one typed payload.
//
// Server settings are forwarded as they are (the server validates them and names an invalid key in a warning,
// docs/protocol.md "Settings"); the client settings say how to start the server. Each key is listed once, in
// SERVER_SETTINGS or CLIENT_SETTINGS; the unit tests check both against package.json and docs/protocol.md.

/** A JSON value as sent to the server. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

interface SettingSpec<T extends Json> {
  readonly default: T;
  /** The allowed values, when the setting is an enum. */
  readonly values?: readonly T[];
}

function setting<const T extends Json>(spec: SettingSpec<T>): SettingSpec<T> {
  return spec;
}

/** Settings the server reads (docs/protocol.md), keyed by their path under `cutune.`, with their defaults. */
export const SERVER_SETTINGS = {
  "agent.kind": setting({ default: "builtin", values: ["builtin", "openai"] }),
  "agent.baseUrl": setting({ default: "" }),
  "agent.model": setting({ default: "" }),
  "agent.autotune": setting({ default: false }),
  "agent.maxIterations": setting({ default: 3 }),
  "agent.targetPct": setting({ default: 85 }),
  "agent.stepTrials": setting({ default: 32 }),
  "budget.trials": setting({ default: 200 }),
  "budget.seconds": setting({ default: 600 }),
  "capture.command": setting({ default: "" }),
  "capture.data": setting({ default: false }),
  arch: setting({ default: "sm_90" }),
  variants: setting({ default: true }),
  timing: setting({ default: "events", values: ["events", "graph"] }),
  storageUrl: setting({ default: "" }),
  backend: setting({ default: "auto", values: ["auto", "cupy", "replay"] }),
  replayFile: setting({ default: "" }),
  replayPace: setting({ default: 0 }),
  logLevel: setting({ default: "info", values: ["error", "warning", "info", "debug"] }),
} as const;

/** Settings only the extension reads; changing any of them restarts the server. */
export const CLIENT_SETTINGS = {
  interpreter: setting({ default: "" }),
  serverArgs: setting<string[]>({ default: [] }),
} as const;

/** Settings the language client library reads itself. */
export const LIBRARY_SETTINGS = {
  "trace.server": setting({ default: "off", values: ["off", "messages", "verbose"] }),
} as const;

export type ServerSettingKey = keyof typeof SERVER_SETTINGS;
export type ClientSettingKey = keyof typeof CLIENT_SETTINGS;

export type AgentKind = NonNullable<(typeof SERVER_SETTINGS)["agent.kind"]["values"]>[number];
export type Backend = NonNullable<(typeof SERVER_SETTINGS)["backend"]["values"]>[number];
export type LogLevel = NonNullable<(typeof SERVER_SETTINGS)["logLevel"]["values"]>[number];

/** Reads one setting under `cutune.` (VS Code's `WorkspaceConfiguration.get`); undefined when unset. */
export type SettingReader = (key: string) => unknown;

export interface ClientSettings {
  /** The configured interpreter, as written (variables not yet expanded); "" when unset. */
  readonly interpreter: string;
  readonly serverArgs: readonly string[];
}

/** The server's settings as sent on the wire: nested objects, camelCase (`{ agent: { kind: ... } }`). */
export function readServerSettings(read: SettingReader): JsonObject {
  const wire: JsonObject = {};
  for (const [key, spec] of Object.entries(SERVER_SETTINGS)) {
    const value = read(key);
    setPath(wire, key.split("."), isJson(value) ? value : spec.default);
  }
  return wire;
}

export function readClientSettings(read: SettingReader): ClientSettings {
  const interpreter = read("interpreter");
  const serverArgs = read("serverArgs");
  return {
    interpreter: typeof interpreter === "string" ? interpreter.trim() : CLIENT_SETTINGS.interpreter.default,
    serverArgs: Array.isArray(serverArgs) ? serverArgs.filter((a): a is string => typeof a === "string") : [],
  };
}

/** What a configuration change asks for: a restart (client settings) or a notification to the server. */
export function changeEffect(affects: (section: string) => boolean): "restart" | "notify" | "none" {
  if (Object.keys(CLIENT_SETTINGS).some((key) => affects(`cutune.${key}`))) {
    return "restart";
  }
  if (Object.keys(SERVER_SETTINGS).some((key) => affects(`cutune.${key}`))) {
    return "notify";
  }
  return "none";
}

function setPath(target: JsonObject, path: readonly string[], value: Json): void {
  const [head, ...rest] = path;
  if (head === undefined) {
    return;
  }
  if (rest.length === 0) {
    target[head] = value;
    return;
  }
  const child = target[head];
  const next: JsonObject = isPlainObject(child) ? child : {};
  target[head] = next;
  setPath(next, rest, value);
}

function isPlainObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isJson(value: unknown): value is Json {
  return value !== undefined && typeof value !== "function" && typeof value !== "symbol" && typeof value !== "bigint";
}
