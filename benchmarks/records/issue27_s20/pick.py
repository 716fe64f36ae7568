"""Pick the variant with the lowest median ledger ns/hit from a gpu_variants.py JSON file; if it
beats base by more than MARGIN, write its gpu.NAME=VALUE settings into hspz/engine/gpu.py."""

import json
import re
import statistics
import sys
from pathlib import Path

MARGIN = 0.015
rows = [json.loads(line) for line in open(sys.argv[1])]
EXPECT = sys.argv[2] if len(sys.argv) > 2 else None  # the digest every kept pass must have
wrong = {r["variant"] for r in rows if EXPECT and r["digest"] != EXPECT}
med = {}
for r in rows:
    if r["pass_kind"] == "timed" and r["variant"] not in wrong:
        med.setdefault(r["variant"], []).append(r["ns_per_hit"])
med = {v: statistics.median(x) for v, x in med.items()}
best = min(med, key=med.get)
print(f"wrong digests: {sorted(wrong)}")
print("medians: " + ", ".join(f"{v} {m:.4f}" for v, m in sorted(med.items(), key=lambda kv: kv[1])))
if best == "base" or ("base" in med and med[best] > med["base"] * (1 - MARGIN)):
    print(f"kept base ({best} {med[best]:.4f} against base {med['base']:.4f})")
    sys.exit(0)
src = Path("hspz/engine/gpu.py")
text = src.read_text()
for setting in best.split("+"):
    name, value = setting.removeprefix("gpu.").split("=")
    line = re.search(rf"^{name} = (.*?)(\s+#.*)?$", text, re.M)
    old = line.group(1)
    new = {"0": "False", "1": "True"}.get(value, value) if old in ("True", "False") else value
    text = text[: line.start(1)] + new + text[line.end(1) :]
    print(f"applied {name} = {new} (was {old})")
src.write_text(text)
