import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { parseResultsView, resultsHtml, sizesSvg, stepsSvg, trialsSvg } from "../../src/common/resultsView";

const reply = {
  kernel: "silu_and_mul_kernel",
  device: "NVIDIA H200",
  replayed: "",
  speedup: 1.5,
  sizes: [
    { label: "num_tokens=16 d=4096", originalUs: 8, bestUs: 6, floorUs: 3, pctOfFloor: 50, originalPctOfFloor: 37.5 },
    { label: "num_tokens=4096 d=14336", originalUs: 120, bestUs: 88, floorUs: 85, pctOfFloor: 96.6, originalPctOfFloor: 70.8 },
  ],
  trials: [
    { number: 0, objective: 1.0, failure: null, config: {} },
    { number: 1, objective: null, failure: "wrong", config: {} },
    { number: 2, objective: 0.7, failure: null, config: {} },
  ],
  steps: [
    { step: 0, source: "builtin", variant: "packs_per_thread", change: "2 packs per thread", outcome: "kept", reason: "", speedup: 1.5 },
    { step: 1, source: "openai", variant: "<script>", change: "x", outcome: "rejected", reason: "wrong: 12 elements differ", speedup: null },
  ],
  agent: { stop: "target", message: "96% of the floor at 1 size(s)" },
};

describe("results view", () => {
  it("reads the server's reply and rejects what is not one", () => {
    const view = parseResultsView(reply);
    assert.ok(view !== undefined);
    assert.equal(view.sizes.length, 2);
    assert.equal(view.trials[1]?.failure, "wrong");
    assert.equal(view.steps[0]?.speedup, 1.5);
    assert.deepEqual(view.agent, reply.agent);
    assert.equal(parseResultsView({ markdown: "x" }), undefined);
    assert.equal(parseResultsView(null), undefined);
  });

  it("draws two bars per size, as long as their % of the floor, with the floor line", () => {
    const view = parseResultsView(reply);
    assert.ok(view !== undefined);
    const svg = sizesSvg(view.sizes);
    const bars = [...svg.matchAll(/class="bar (original|best)"[^>]*width="([\d.]+)"/g)];
    assert.deepEqual(
      bars.map((m) => m[1]),
      ["original", "best", "original", "best"],
    );
    const widths = bars.map((m) => Number(m[2]));
    const scale = 560 - 190 - 60;
    assert.deepEqual(widths, [(37.5 * scale) / 100, (50 * scale) / 100, (70.8 * scale) / 100, (96.6 * scale) / 100]);
    assert.match(svg, /class="floor"/);
    assert.match(svg, /97% of floor/);
  });

  it("draws trials as dots, failed ones in red, and the best so far", () => {
    const view = parseResultsView(reply);
    assert.ok(view !== undefined);
    const svg = trialsSvg(view.trials);
    assert.equal(svg.match(/<circle class="dot"/g)?.length, 2);
    assert.equal(svg.match(/class="failed"/g)?.length, 1);
    assert.match(svg, /<polyline class="front" points="[\d.]+,[\d.]+ [\d.]+,[\d.]+"/);
  });

  it("shows each agent step with its outcome, and escapes what the LLM wrote", () => {
    const view = parseResultsView(reply);
    assert.ok(view !== undefined);
    const svg = stepsSvg(view.steps, view.agent);
    assert.match(svg, /Stopped: target — 96% of the floor/);
    assert.match(svg, /class="kept"/);
    assert.match(svg, /class="rejected"/);
    assert.ok(!svg.includes("<script>") && svg.includes("&#60;script&#62;"));
    assert.match(svg, /wrong: 12 elements differ/);
  });

  it("builds a page that runs no script, and says when there is nothing yet", () => {
    const view = parseResultsView(reply);
    assert.ok(view !== undefined);
    const html = resultsHtml(view, "vscode-resource:");
    assert.match(html, /default-src 'none'/);
    assert.ok(!/script-src/.test(html));
    assert.match(html, /1\.50× over the original · NVIDIA H200/);
    const empty = parseResultsView({ kernel: "k", message: "no stored result for k: autotune it first", sizes: [] });
    assert.ok(empty !== undefined);
    assert.match(resultsHtml(empty, "x"), /autotune it first/);
    assert.match(resultsHtml(empty, "x"), /No measured sizes yet/);
  });
});
