"""The every-node row's fused build under callgrind: a dump after the imports and one after the build, so the second
dump file holds the build's instructions alone (Ir: the same on a loaded machine). usage (from a checkout root):
  PYTHONPATH=. valgrind --tool=callgrind --callgrind-out-file=OUT.%p python cgbuild.py
Prints the entries built; the dumps are OUT.PID.1 (imports, scenario) and OUT.PID.2 (the build)."""
import dataclasses
import os
import subprocess


def dump() -> None:
    subprocess.run(["callgrind_control", "-d", str(os.getpid())], check=True, capture_output=True, timeout=600)


from mkernel.builders import gemm_ar  # noqa: E402
from mkernel.scenario import load_scenario  # noqa: E402

sc = load_scenario("scenarios/paper-ib-2x8.toml")
w = dataclasses.replace(sc.workload, m=32768, n=32768, k=2048)
dump()
fused = gemm_ar.build(w, sc.cluster, grouped=True)
dump()
print(len(fused.tasks), flush=True)
os._exit(0)
