"""The fused ops' time and speedup on paper-efa-2x8 against the EFA terms (what-ifs; nothing here is committed as a
term). Run from the repository root."""
import json, subprocess, tempfile, re, sys
from pathlib import Path
base = Path("scenarios/paper-efa-2x8.toml").read_text()
def variant(**kv):
    t = base
    for k, v in kv.items():
        if re.search(rf"^{k} = .*$", t, flags=re.M):
            t = re.sub(rf"^{k} = [^\s#]*", f"{k} = {v}", t, flags=re.M)
        else:  # add to [cluster.nic]
            t = t.replace("[cluster.nic]", f"[cluster.nic]\n{k} = {v}", 1) if k != "doorbell_us" else t
    p = Path(tempfile.mkstemp(suffix=".toml", dir="/tmp/efa8")[1]); p.write_text(t); return p
def fused(scn, kernel, m):
    mm, n, k = (m, m // 16, m) if kernel == "ag_gemm" else (m, m, m // 16)
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run(["mkernel", "run", str(scn), "--kernel", kernel, "--m", str(mm), "--n", str(n), "--k", str(k),
                        "--kernels", "reference", "--collapse", "--json", f.name], check=True, capture_output=True)
        d = json.load(open(f.name)); return d["time_s"] * 1e6, d["baseline"]["time_s"] * 1e6
variants = {"as is (lat 8, msg 1, jitter 2)": {}, "latency 16": {"latency_us": 16.0}, "latency 20 (the p5 bound)": {"latency_us": 20.0}, "latency 24": {"latency_us": 24.0},
            "per_message 3": {"per_message_us": 3.0}, "jitter 0": {"srd_jitter_us": 0.0}, "jitter 6": {"srd_jitter_us": 6.0}}
pts = [("gemm_rs", 2048), ("gemm_rs", 4096), ("gemm_rs", 8192), ("gemm_ar", 2048), ("gemm_ar", 4096), ("ag_gemm", 4096), ("ag_gemm", 8192)]
print("| variant | " + " | ".join(f"{k} {m}" for k, m in pts) + " |")
print("|---" * (len(pts) + 1) + "|")
for name, kv in variants.items():
    scn = variant(**kv)
    cells = []
    for k, m in pts:
        f, b = fused(scn, k, m)
        cells.append(f"{f:.0f} us, {b/f:.2f}x")
    print(f"| {name} | " + " | ".join(cells) + " |")
    scn.unlink()
