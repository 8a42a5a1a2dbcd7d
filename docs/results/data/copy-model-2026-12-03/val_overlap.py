import importlib.util, sys
spec = importlib.util.spec_from_file_location("kv", "tools/studies/kvtile_lockstep.py")
kv = importlib.util.module_from_spec(spec); spec.loader.exec_module(kv)
from mkernel.sim import engine
engine.Model._nvlink = kv._overlapped_nvlink
from mkernel.cli import main
sys.exit(main(sys.argv[1:]))
