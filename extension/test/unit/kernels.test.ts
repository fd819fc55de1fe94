import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { kernelAtLine, kernelsFromLenses, type WireCodeLens } from "../../src/common/kernels";

function lens(line: number, kernel: string): WireCodeLens {
  return { range: { start: { line } }, command: { arguments: [{ uri: "file:///a.cu", kernel }] } };
}

describe("kernels", () => {
  it("collects one entry per kernel from its lenses, in line order", () => {
    const lenses = [lens(40, "b"), lens(10, "a"), lens(10, "a"), { range: { start: { line: 3 } } }];
    assert.deepEqual(kernelsFromLenses(lenses), [
      { kernel: "a", line: 10 },
      { kernel: "b", line: 40 },
    ]);
  });

  it("reads the kernel of a lens sent without its command from its data", () => {
    const unresolved = [
      { range: { start: { line: 12 } }, data: [96, "b"] },
      { range: { start: { line: 2 } }, data: [1, "a"] },
      { range: { start: { line: 5 } }, data: "not ours" },
    ];
    assert.deepEqual(kernelsFromLenses(unresolved), [
      { kernel: "a", line: 2 },
      { kernel: "b", line: 12 },
    ]);
  });

  it("picks the kernel at or above the cursor", () => {
    const kernels = [
      { kernel: "a", line: 10 },
      { kernel: "b", line: 40 },
    ];
    assert.equal(kernelAtLine(kernels, 10), "a");
    assert.equal(kernelAtLine(kernels, 39), "a");
    assert.equal(kernelAtLine(kernels, 41), "b");
    assert.equal(kernelAtLine(kernels, 2), undefined, "above every kernel: ask");
  });

  it("picks the only kernel wherever the cursor is", () => {
    assert.equal(kernelAtLine([{ kernel: "a", line: 10 }], 0), "a");
    assert.equal(kernelAtLine([], 0), undefined);
  });
});
