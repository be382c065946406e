"""Two `kdvfs validate-steps --json` reports side by side: per step the energy and median-clock errors of the judged
prediction, and the targets met. Usage: python validation/user-findings7/compare.py BEFORE.json AFTER.json"""
import json
import statistics as st
import sys

a, b = (json.load(open(p)) for p in sys.argv[1:3])
j = a["judged_on"]
ra = {r["model"]: r["error"][j] for r in a["steps"]}
rb = {r["model"]: r["error"][j] for r in b["steps"]}
print(f"| step | energy before | energy after | median clock before | median clock after |\n|---|---:|---:|---:|---:|")
for m in ra:
    print(f"| {m} | {ra[m]['energy_pct']:+.2f} % | {rb[m]['energy_pct']:+.2f} % | {ra[m]['median_clock_pct']:+.2f} % | "
          f"{rb[m]['median_clock_pct']:+.2f} % |")
for lab, doc, r in (("before", a, ra), ("after", b, rb)):
    e = [v["energy_pct"] for v in r.values()]
    c = [v["median_clock_pct"] for v in r.values()]
    print(f"\n{lab}: within the targets: energy {doc['met']['energy']} of {doc['met']['of']}, median clock "
          f"{doc['met']['clock']} of {doc['met']['of']}; mean energy error {st.mean(e):+.2f} %, mean |energy error| "
          f"{st.mean(map(abs, e)):.2f} %, mean |clock error| {st.mean(map(abs, c)):.2f} %", end="")
print()
