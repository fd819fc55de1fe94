// The Python extension's active environment, when that extension is installed. It is optional: nothing here
// fails when it is absent, and package.json declares no dependency on it.

import type { Disposable, Event, Uri } from "vscode";

import { logWarning, errorText } from "./log";
import { getExtension } from "./vscodeapi";

const PYTHON_EXTENSION_ID = "ms-python.python";

// The part of the Python extension's API (its `environments` export) used here.
interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: Uri): { readonly path: string };
  resolveEnvironment(path: string): Promise<{ readonly executable: { readonly uri: Uri | undefined } } | undefined>;
  readonly onDidChangeActiveEnvironmentPath: Event<unknown>;
}

interface PythonExtensionApi {
  readonly environments?: PythonEnvironmentsApi;
}

async function environmentsApi(): Promise<PythonEnvironmentsApi | undefined> {
  const extension = getExtension<PythonExtensionApi | undefined>(PYTHON_EXTENSION_ID);
  if (extension === undefined) {
    return undefined;
  }
  try {
    const api = extension.isActive ? extension.exports : await extension.activate();
    return api?.environments;
  } catch (error) {
    logWarning(`The Python extension did not activate: ${errorText(error)}`);
    return undefined;
  }
}

/** The executable of the Python extension's active environment for the resource, if any. */
export async function activeEnvironmentExecutable(resource: Uri | undefined): Promise<string | undefined> {
  const api = await environmentsApi();
  if (api === undefined) {
    return undefined;
  }
  try {
    const active = api.getActiveEnvironmentPath(resource);
    const environment = await api.resolveEnvironment(active.path);
    return environment?.executable.uri?.fsPath;
  } catch (error) {
    logWarning(`The Python extension gave no active environment: ${errorText(error)}`);
    return undefined;
  }
}

/** Calls back when the user picks another environment in the Python extension. */
export async function onDidChangeActiveEnvironment(listener: () => void): Promise<Disposable | undefined> {
  const api = await environmentsApi();
  return api?.onDidChangeActiveEnvironmentPath(() => {
    listener();
  });
}
