# Each P-CSCF's CPU share per second, from the lab's resource samples of the run (lab-resource-events.jsonl):
#   python3 cpu-share.py lab-resource-events.jsonl
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
fault = next(e["t_ns"] for e in ev if e["kind"] == "fault")
for node in ("pcscf1", "pcscf2", "pcscf3"):
    s = [(e["t_ns"], e["cpu_s"]) for e in ev if e["kind"] == "resource" and e["target"] == node]
    shares = [(c1 - c0) / ((t1 - t0) / 1e9) * 100 for (t0, c0), (t1, c1) in zip(s, s[1:])]
    during = [x for (t, _), x in zip(s, shares) if fault <= t]
    print(f"{node}: CPU % per second, whole run min {min(shares):.0f} max {max(shares):.0f}; "
          f"from the fault on min {min(during):.0f} max {max(during):.0f} (n = {len(shares)} samples)")
