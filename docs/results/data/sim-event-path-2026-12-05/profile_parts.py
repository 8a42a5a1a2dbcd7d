"""Sampled-profile shares of a simulated run by component: py-spy raw files (py-spy record -r 400 -f raw -- python
runonly.py 2), each stack under SimBackend.run counted once, for the first component of this list it passes through.
usage: profile_parts.py spy-main.txt spy-branch.txt"""
import collections, re, sys
def agg(path):
    tot = 0; comp = collections.Counter()
    for line in open(path):
        stack, n = line.rsplit(' ', 1); n = int(n)
        frames = stack.split(';')
        if not any('SimBackend.run' in f for f in frames): continue
        tot += n
        names = ' '.join(frames)
        if 'Cells.__init__' in names or 'ArrivalTracker.__init__' in names: comp['tracker set-up (grids)'] += n
        elif 'LoggedTracker.finish' in names: comp['tracker verdict at the end'] += n
        elif 'Model.__init__' in names: comp['model set-up, other'] += n
        elif 'network.py' in names: comp['network (puts, proxy, NIC)'] += n
        elif 'flows.py' in names: comp['flows (NVLink/NIC rates)'] += n
        elif 'bump_keys' in names or 'flat_keys' in names or 'Run.bumps' in names or 'Model._signal' in names or 'Model._flags' in names: comp['signals (keys, bumps, flags)'] += n
        elif 'dispatch.py' in names: comp['dispatch (take, join, block, resume)'] += n
        elif 'hazardlog.py' in names: comp['tracker log'] += n
        elif 'engine.py' in names: comp['engine work (costs, timers)'] += n
        else: comp['event loop, other'] += n
    return tot, comp
for p in sys.argv[1:]:
    tot, comp = agg(p)
    print(p, tot)
    for k, v in sorted(comp.items(), key=lambda kv: -kv[1]): print(f"  {100*v/tot:5.1f}% {k}")
