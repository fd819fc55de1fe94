// Bundles the extension into dist/extension.js (vscode stays external: VS Code provides it).
// `node esbuild.mjs --production` minifies and drops the source map; `--watch` rebuilds on change.
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");
const watch = process.argv.includes("--watch");

const context = await esbuild.context({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node20",
  outfile: "dist/extension.js",
  external: ["vscode"],
  minify: production,
  sourcemap: !production,
  logLevel: "info",
});
if (watch) {
  await context.watch();
} else {
  await context.rebuild();
  await context.dispose();
}
