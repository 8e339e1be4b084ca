#!/usr/bin/env python3
"""Print the rows of crates/onnx/src/legacy.rs's SAME_FORM_SINCE table from the onnx package's
operator schemas.

For every default-domain operator whose schema in effect at opset 7 (its newest version <= 7)
is older than 7, the row gives that version: the oldest opset whose form of the operator is the
form lumen reads at opset 7. A model at opset v < 7 imports when each of its nodes' operators
has a row with since <= v.

    python3 -m pip install onnx==1.23.2
    python3 scripts/legacy_opsets.py        # prints the Rust rows

Made with onnx 1.23.2.
"""
import onnx
import onnx.defs


def main():
    versions = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            versions.setdefault(s.name, []).append(s.since_version)
    rows = []
    for op, vs in versions.items():
        at7 = [v for v in vs if v <= 7]
        if at7 and max(at7) < 7:
            rows.append((op, max(at7)))
    print(f"// {len(rows)} operators, from onnx {onnx.__version__}'s schemas "
          "(scripts/legacy_opsets.py).")
    for op, since in sorted(rows):
        print(f'    ("{op}", {since}),')


if __name__ == "__main__":
    main()
