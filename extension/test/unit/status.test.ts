import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { JobBoard, parseJobStatus, statusView, type JobStatus } from "../../src/common/status";

const job: JobStatus = {
  uri: "file:///w/a.cu",
  kernel: "silu_and_mul_kernel",
  state: "running",
  done: 37,
  budget: 200,
  best: 1.42,
  message: "trial 37",
};

describe("status", () => {
  it("parses cutune/jobStatus and rejects what does not match the protocol", () => {
    assert.deepEqual(parseJobStatus({ ...job }), job);
    assert.deepEqual(parseJobStatus({ uri: "u", kernel: "k", state: "queued" }), {
      uri: "u",
      kernel: "k",
      state: "queued",
      done: 0,
      budget: 0,
      best: null,
      message: "",
    });
    assert.equal(parseJobStatus({ ...job, state: "paused" }), undefined);
    assert.equal(parseJobStatus(null), undefined);
  });

  it("keeps the queued and running jobs, one per kernel", () => {
    const board = new JobBoard();
    board.update({ ...job, state: "queued" });
    board.update(job);
    board.update({ ...job, kernel: "other" });
    assert.deepEqual(
      board.active().map((j) => [j.kernel, j.state]),
      [
        ["silu_and_mul_kernel", "running"],
        ["other", "running"],
      ],
    );
    board.update({ ...job, state: "done" });
    board.update({ ...job, kernel: "other", state: "cancelled" });
    assert.deepEqual(board.active(), []);
  });

  it("shows the running job while tuning", () => {
    const view = statusView({ kind: "running", interpreter: "/py" }, [job, { ...job, kernel: "other" }]);
    assert.equal(view.text, "$(sync~spin) cutune: silu_and_mul_kernel 37/200 · 1.42× (+1)");
    assert.match(view.tooltip, /Best so far: 1\.42× faster/);
    assert.match(view.tooltip, /cancel/);
  });

  it("shows the server state otherwise, coloured when something is wrong", () => {
    assert.equal(statusView({ kind: "running", interpreter: "/py" }, []).text, "$(zap) cutune");
    const missing = statusView({ kind: "unavailable", label: "not installed", reason: "cutune is not installed" }, []);
    assert.deepEqual(missing, { text: "$(warning) cutune: not installed", tooltip: "cutune is not installed", background: "warning" });
    assert.equal(statusView({ kind: "crashed", reason: "exit 1" }, []).background, "error");
  });
});
