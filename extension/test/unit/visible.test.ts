import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ShownLinesReporter, visibleRangesParams, type VisibleRangesParams } from "../../src/common/visible";

describe("visible", () => {
  it("writes shown lines as LSP ranges of a document", () => {
    assert.deepEqual(visibleRangesParams("file:///a.cu", [{ first: 10, last: 50 }]), {
      textDocument: { uri: "file:///a.cu" },
      ranges: [{ start: { line: 10, character: 0 }, end: { line: 50, character: 0 } }],
    });
  });

  it("sends each document's latest lines once per delay, and nothing after dispose", async () => {
    const sent: VisibleRangesParams[] = [];
    const reporter = new ShownLinesReporter((params) => sent.push(params), 5);
    reporter.report("file:///a.cu", [{ first: 0, last: 40 }]);
    reporter.report("file:///a.cu", [{ first: 1, last: 41 }]);
    reporter.report("file:///b.cu", [{ first: 7, last: 9 }]);
    assert.equal(sent.length, 0);
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.deepEqual(
      sent.map((p) => [p.textDocument.uri, p.ranges[0]?.start.line]),
      [
        ["file:///a.cu", 1],
        ["file:///b.cu", 7],
      ],
    );
    reporter.report("file:///a.cu", [{ first: 2, last: 42 }]);
    reporter.dispose();
    await new Promise((resolve) => setTimeout(resolve, 30));
    assert.equal(sent.length, 2);
  });
});
