"""The every-node gemm_ar row's fused schedule (what validate() is handed in the CLI run)."""
import dataclasses


def build():
    from mkernel.scenario import load_scenario
    from mkernel import runner
    import mkernel.ir as ir
    import mkernel.sim.backend as sb
    cap = {}
    orig = ir.Schedule.validate

    def v(self, *a, **k):
        cap.setdefault('s', self)
        raise Stop

    class Stop(Exception):
        pass
    sc = load_scenario('scenarios/paper-ib-2x8.toml')
    sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, kernel='gemm_ar', m=32768, n=32768, k=2048))
    ir.Schedule.validate = v
    try:
        runner.run(sc, collapse=False)
    except Stop:
        pass
    finally:
        ir.Schedule.validate = orig
    return cap['s']
