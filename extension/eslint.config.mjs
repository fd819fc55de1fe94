// Lint: eslint's and typescript-eslint's recommended rules with type information, plus the rule that keeps the
// `vscode` namespace behind src/common/vscodeapi.ts (type imports are fine anywhere).
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/", "out/", "node_modules/", "e2e/host/", "e2e/artifacts/", "esbuild.mjs", "eslint.config.mjs"] },
  eslint.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      "@typescript-eslint/no-restricted-imports": [
        "error",
        {
          paths: [
            {
              name: "vscode",
              message: "Use src/common/vscodeapi.ts, so that the logic can be tested without VS Code.",
              allowTypeImports: true,
            },
          ],
        },
      ],
    },
  },
  {
    // node:test's describe/it return promises the runner awaits.
    files: ["test/**/*.ts", "e2e/**/*.ts"],
    rules: { "@typescript-eslint/no-floating-promises": "off" },
  },
  {
    files: ["src/common/vscodeapi.ts"],
    rules: { "@typescript-eslint/no-restricted-imports": "off" },
  },
);
